import type { MiddlewareHandler } from "hono";
import type { AppBindings } from "../env";

/**
 * Adds `warnings: [...]` to a successful JSON object answer when the route noted body fields it
 * ignored (a typo such as `chunksize` used to succeed silently with the default). Errors, streams
 * and non-object answers are left exactly as they were.
 */
export const bodyWarnings: MiddlewareHandler<AppBindings> = async (c, next) => {
  await next();
  const warnings = c.get("warnings");
  if (!warnings?.length || c.res.status >= 400) return;
  if (!(c.res.headers.get("content-type") ?? "").startsWith("application/json")) return;
  let body: unknown;
  try {
    body = await c.res.clone().json();
  } catch {
    return;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return;
  const headers = new Headers(c.res.headers);
  headers.delete("content-length");
  c.res = new Response(JSON.stringify({ ...body, warnings }), { status: c.res.status, headers });
  // Hono carries the old headers over on assignment; the old length is wrong for the new body.
  c.res.headers.delete("content-length");
};
