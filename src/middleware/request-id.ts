import type { MiddlewareHandler } from "hono";
import type { AppBindings } from "../env";
import { newId } from "../lib/ids";

/** Gives every request an id, echoed in `x-request-id`, that ties log lines to a response. */
export const requestId: MiddlewareHandler<AppBindings> = async (c, next) => {
  const id = newId();
  c.set("requestId", id);
  await next();
  c.res.headers.set("x-request-id", id);
};
