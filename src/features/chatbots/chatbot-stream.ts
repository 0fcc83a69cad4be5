import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { AppBindings } from "../../env";
import { AppError } from "../../lib/errors";
import { publicResult, type RunResult } from "./chatbot-run";
import { keepAliveFor } from "./keep-alive";

/**
 * Server-sent events through Hono's `streamSSE`: each piece as `data: {"type":"stream",
 * "output_value":...}`, then the final result in the shape of the non-streaming body (the same
 * bytes the hand-written writer sent). The answer runs under `waitUntil`, so it is stored even
 * when the client goes away; pieces are queued, not awaited, so a slow reader never stalls it.
 */
export function streamAnswer(
  c: Context<AppBindings>,
  execute: (onPiece: (text: string) => void) => Promise<RunResult>,
  extra: Record<string, unknown>,
): Response {
  c.header("x-accel-buffering", "no");
  return streamSSE(c, async (sse) => {
    // Writes form one chain (in order, never awaited by the answer); the stream closes after the last.
    let written: Promise<void> = Promise.resolve();
    const send = (event: Record<string, unknown>): void => {
      const data = JSON.stringify(event);
      written = written
        .then(() => (sse.aborted || sse.closed ? undefined : sse.writeSSE({ data })))
        .catch(() => undefined);
    };
    const work = (async () => {
      try {
        const result = await execute((text) => send({ type: "stream", output_value: text }));
        send(publicResult(result, extra));
      } catch (error) {
        send({ status: "failed", error: failureMessage(error) });
      }
    })();
    keepAliveFor(c)(work);
    await work;
    await written;
  });
}

function failureMessage(error: unknown): string {
  if (error instanceof AppError) return error.message;
  console.error(
    JSON.stringify({
      level: "error",
      where: "chatbot.answer",
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    }),
  );
  return "the chatbot failed to answer";
}
