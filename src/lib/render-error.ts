import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AppBindings } from "../env";
import { routePath } from "hono/route";
import { AppError } from "./errors";
import { causeChain, log } from "./log";

/** Which envelope a request answers errors in: its route's group, else by path. */
function groupOf(c: Context<AppBindings>): "A" | "B" {
  const declared = c.get("group");
  if (declared) return declared;
  return /^\/+v1(\/|$)/i.test(c.req.path) ? "A" : "B";
}

function toAppError(error: unknown, c: Context<AppBindings>): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof HTTPException) {
    const status = error.status;
    if (status === 413) return new AppError("payload_too_large", "request body is too large");
    if (status === 401) return new AppError("unauthorized", error.message || "Not authenticated");
    if (status >= 400 && status < 500) return new AppError("bad_request", error.message || "bad request");
  }
  // The route pattern, not the path: a path may carry ids the log has no need of.
  log(c.env?.LOG_LEVEL, "error", "failure", {
    request_id: c.get("requestId"),
    method: c.req.method,
    route: routePath(c, -1),
    status: 500,
    cause: causeChain(error),
    stack: error instanceof Error ? error.stack : undefined,
  });
  return new AppError("internal", `internal server error; reference ${c.get("requestId") ?? "none"} in the server log`);
}

/** The root error handler: turns every thrown error into Group A or Group B's envelope. */
export function renderError(error: unknown, c: Context<AppBindings>): Response {
  const appError = toAppError(error, c);
  // An outside service that failed (502) or a missing piece of configuration (503) is the operator's
  // business too: its reason (host and status, never a body or a key) goes to the log.
  if (appError.status > 500)
    log(c.env?.LOG_LEVEL, "warn", "failure", {
      request_id: c.get("requestId"),
      method: c.req.method,
      route: routePath(c, -1),
      status: appError.status,
      cause: causeChain(error),
    });
  const group = groupOf(c);
  // Group A answers every validation failure 400 `{status, error}`; only Group B has the 422 shape.
  const status = (group === "A" && appError.code === "validation" ? 400 : appError.status) as 400;
  if (appError.retryAfterSeconds !== undefined)
    c.header("Retry-After", String(Math.max(1, Math.ceil(appError.retryAfterSeconds))));
  if (appError.rawBody) return c.json(appError.rawBody, status);
  if (group === "A") return c.json({ status: "failed", error: appError.message }, status);
  if (appError.issues) return c.json({ detail: appError.issues }, status);
  return c.json({ detail: appError.message }, status);
}

export function renderNotFound(c: Context<AppBindings>): Response {
  return renderError(new AppError("not_found", `no route for ${c.req.method} ${c.req.path}`), c);
}
