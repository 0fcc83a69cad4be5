import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import type { AppBindings } from "../env";
import { log, setIsolateLogLevel } from "../lib/log";

/**
 * One line per request: id, method, route pattern (never the raw path, which may carry ids or
 * tokens in a query), status, milliseconds until the response was ready, organization. 5xx
 * answers log at error level (their cause is logged separately by the error renderer), 4xx at
 * info, like the rest: a 4xx is the client's business.
 */
export const accessLog: MiddlewareHandler<AppBindings> = async (c, next) => {
  const started = Date.now();
  setIsolateLogLevel(c.env.LOG_LEVEL);
  await next();
  const status = c.res.status;
  log(c.env.LOG_LEVEL, status >= 500 ? "error" : "info", "request", {
    request_id: c.get("requestId"),
    method: c.req.method,
    route: routePath(c, -1),
    status,
    ms: Date.now() - started,
    org_id: c.get("auth")?.orgId ?? null,
  });
};
