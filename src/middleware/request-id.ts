import type { MiddlewareHandler } from "hono";
import { requestId as honoRequestId } from "hono/request-id";
import type { AppBindings } from "../env";
import { newId } from "../lib/ids";

const assignId = honoRequestId({ generator: () => newId(), limitLength: 64 });

/**
 * Gives every request an id, echoed in `x-request-id`, that ties log lines to a response: Hono's
 * request-id middleware with Loom's id format. A caller's own `x-request-id` (letters, digits,
 * `-`, `_`, `=`, at most 64 characters) is kept, so a proxy's trace id reaches Loom's log.
 */
export const requestId: MiddlewareHandler<AppBindings> = (c, next) =>
  assignId(c, async () => {
    await next();
    // Hono adds its header only to responses made through the context; one a handler built itself
    // (a stream, a stored file) gets it here.
    if (!c.res.headers.has("x-request-id")) c.res.headers.set("x-request-id", c.get("requestId"));
  });
