import type { MiddlewareHandler } from "hono";
import type { AppBindings } from "../env";
import { AppError } from "../lib/errors";

const tooLarge = (maxBytes: number): AppError => new AppError("payload_too_large", `request body exceeds ${maxBytes} bytes`);

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/**
 * Reads a route's body up to `maxBytes` and answers 413 past it, without reading the rest: a
 * declared Content-Length over the cap is refused before anything is read, and the body is counted
 * as it streams in and the stream cancelled at the cap. It counts even when a Content-Length is
 * declared (unlike hono/body-limit, which trusts the header): a caller inside the runtime (a
 * service binding) can declare a small length and stream far more. The handler then reads the
 * buffered copy.
 */
export function bodyCap(maxBytes: number): MiddlewareHandler<AppBindings> {
  return async (c, next) => {
    const request = c.req.raw;
    if (!request.body) return next();
    const declared = Number(request.headers.get("content-length") ?? "0");
    if (declared > maxBytes) throw tooLarge(maxBytes);
    const reader = request.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
    const headers = new Headers(request.headers);
    headers.delete("content-length");
    c.req.raw = new Request(request, { headers, body: concat(chunks, size) });
    await next();
  };
}
