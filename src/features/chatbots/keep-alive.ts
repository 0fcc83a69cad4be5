import type { Context } from "hono";
import type { AppBindings } from "../../env";

/** Keeps background work (a streamed answer, a webhook reply) alive after the response is sent. */
export function keepAliveFor(c: Context<AppBindings>): (promise: Promise<unknown>) => void {
  return (promise) => {
    try {
      c.executionCtx.waitUntil(promise);
    } catch {
      // No execution context (a bare app.request): the promise still runs to completion.
    }
  };
}
