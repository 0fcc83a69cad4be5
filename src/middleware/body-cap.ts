import type { Context, MiddlewareHandler } from "hono";
import type { AppBindings } from "../env";
import { AppError, badRequest } from "../lib/errors";

const tooLarge = (maxBytes: number): AppError =>
  new AppError("payload_too_large", `request body exceeds ${maxBytes} bytes`);

/** Each request's body as the cap read it; handlers read it from here, not from the consumed request stream. */
const bodies = new WeakMap<Context, Uint8Array>();

/** The bytes `bodyCap` read for this request (empty when there was no body). */
export function cappedBody(c: Context): Uint8Array {
  return bodies.get(c) ?? new Uint8Array(0);
}

async function readUpTo(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  declared: number | null,
): Promise<Uint8Array> {
  const reader = stream.getReader();
  // With a declared length (every HTTP/1.1 body that is not chunked) the bytes go straight into one
  // buffer; otherwise chunks are kept and joined once.
  let buffer = new Uint8Array(declared ?? 0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.byteLength > maxBytes) {
      await reader.cancel();
      throw tooLarge(maxBytes);
    }
    if (declared !== null && size + value.byteLength > declared) {
      await reader.cancel();
      throw badRequest("request body is longer than its Content-Length");
    }
    if (declared !== null) buffer.set(value, size);
    else chunks.push(value);
    size += value.byteLength;
  }
  if (declared !== null) return buffer.subarray(0, size);
  buffer = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    buffer.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return buffer;
}

/**
 * Reads a route's body up to `maxBytes` and answers 413 past it, without reading the rest: a
 * declared Content-Length over the cap is refused before anything is read, and the body is counted
 * as it streams in and the stream cancelled at the cap. It counts even when a length is declared
 * (hono/body-limit trusts the header and then reads whatever comes): a caller inside the runtime,
 * such as another Worker through a service binding, can declare a small length and stream far
 * more; such a body is a 400 as soon as it passes its declared length.
 */
export function bodyCap(maxBytes: number): MiddlewareHandler<AppBindings> {
  return async (c, next) => {
    const request = c.req.raw;
    if (request.body) {
      const header = request.headers.get("content-length");
      const declared = header !== null && /^\d+$/.test(header) ? Number(header) : null;
      if (declared !== null && declared > maxBytes) throw tooLarge(maxBytes);
      bodies.set(c, await readUpTo(request.body, maxBytes, declared));
    }
    await next();
  };
}
