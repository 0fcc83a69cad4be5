import { AppError, badRequest } from "./errors";
import { fromBase64 } from "./crypto";

const BASE64_TEXT = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Decodes base64 text a client sent in `field`: the standard or URL-safe alphabet, with or
 * without padding, whitespace and a `data:...;base64,` prefix allowed. Anything else is a 400
 * naming the field (never the runtime's own decoding error, which would surface as a 500), and a
 * value that would decode past `maxBytes` is a 413 before any of it is decoded.
 */
export function decodeClientBase64(text: string, field: string, maxBytes: number): Uint8Array {
  const compact = text
    .replace(/^data:[^,]*;base64,/i, "")
    .replace(/\s+/g, "")
    .replace(/-/g, "+")
    .replace(/_/g, "/");
  if (Math.floor((compact.replace(/=+$/, "").length * 3) / 4) > maxBytes)
    throw new AppError("payload_too_large", `${field}: must be at most ${maxBytes} bytes`);
  if (!BASE64_TEXT.test(compact) || compact.replace(/=+$/, "").length % 4 === 1)
    throw badRequest(`${field}: must be base64 text or a file part`);
  const padded = compact.replace(/=+$/, "");
  return fromBase64(padded + "=".repeat((4 - (padded.length % 4)) % 4));
}
