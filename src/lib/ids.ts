/**
 * Identifiers are 24 lowercase hex characters, shaped like a database object id:
 * 4 bytes of seconds since the epoch (so ids sort roughly by creation) and 8 random bytes.
 */
export function newId(now: number = Date.now()): string {
  const bytes = new Uint8Array(12);
  const seconds = Math.floor(now / 1000);
  bytes[0] = (seconds >>> 24) & 0xff;
  bytes[1] = (seconds >>> 16) & 0xff;
  bytes[2] = (seconds >>> 8) & 0xff;
  bytes[3] = seconds & 0xff;
  crypto.getRandomValues(bytes.subarray(4));
  return toHex(bytes);
}

export const ID_PATTERN = /^[0-9a-f]{24}$/;

export function isId(value: string): boolean {
  return ID_PATTERN.test(value);
}

export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}
