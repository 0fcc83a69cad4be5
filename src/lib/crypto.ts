import { toHex } from "./ids";

const encoder = new TextEncoder();

/** Workers cap PBKDF2 at 100,000 iterations; that is the slow key derivation we use. */
const PBKDF2_ITERATIONS = 100_000;

export function randomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  return bytes;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(text));
  return toHex(new Uint8Array(digest));
}

/**
 * Compares two secrets (signatures, hashes) in time that depends only on their lengths, with the
 * runtime's `crypto.subtle.timingSafeEqual` (which refuses inputs of different lengths, so those
 * answer false first: the length of an expected signature is public anyway).
 */
export function timingSafeEqual(a: string, b: string): boolean {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  if (left.byteLength !== right.byteLength) return false;
  return crypto.subtle.timingSafeEqual(left, right);
}

async function pbkdf2(password: string, salt: Uint8Array, iterations: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(password), "PBKDF2", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt, iterations }, key, 256);
  return new Uint8Array(bits);
}

/** Hash format: `pbkdf2-sha256$<iterations>$<salt b64>$<hash b64>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await pbkdf2(password, salt, PBKDF2_ITERATIONS);
  return `pbkdf2-sha256$${PBKDF2_ITERATIONS}$${toBase64(salt)}$${toBase64(hash)}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, iterationsText, saltText, hashText] = stored.split("$");
  if (scheme !== "pbkdf2-sha256" || !iterationsText || !saltText || !hashText) return false;
  const hash = await pbkdf2(password, fromBase64(saltText), Number(iterationsText));
  return timingSafeEqual(toBase64(hash), hashText);
}

/**
 * A well-formed hash no password produces (its digest is all zeros). Checking a password against
 * it costs exactly what checking a real account's does, so a login for an unknown account takes
 * as long as one for a known account.
 */
const UNMATCHABLE_HASH = `pbkdf2-sha256$${PBKDF2_ITERATIONS}$${toBase64(new Uint8Array(16))}$${toBase64(new Uint8Array(32))}`;

/** Spends one password check's work and fails: for logins naming no account. */
export async function verifyPasswordAgainstNothing(password: string): Promise<false> {
  await verifyPassword(password, UNMATCHABLE_HASH);
  return false;
}

async function importAesKey(secret: string): Promise<CryptoKey> {
  // Any secret string works: it is stretched to a 256-bit key with SHA-256.
  const raw = await crypto.subtle.digest("SHA-256", encoder.encode(secret));
  return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

/** Encrypts with AES-256-GCM; output is `v1.<iv b64>.<ciphertext b64>`. */
export async function encryptSecret(plaintext: string, keySecret: string): Promise<string> {
  const key = await importAesKey(keySecret);
  const iv = randomBytes(12);
  const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, encoder.encode(plaintext));
  return `v1.${toBase64(iv)}.${toBase64(new Uint8Array(sealed))}`;
}

export async function decryptSecret(sealed: string, keySecret: string): Promise<string> {
  const [version, ivText, dataText] = sealed.split(".");
  if (version !== "v1" || !ivText || !dataText) throw new Error("unrecognised secret format");
  const key = await importAesKey(keySecret);
  const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(ivText) }, key, fromBase64(dataText));
  return new TextDecoder().decode(plain);
}

/** HMAC-SHA256 of `message` with `secret`, hex encoded. Used for signed visitor sessions and webhooks. */
export async function hmacSha256Hex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const signature = await crypto.subtle.sign("HMAC", key, encoder.encode(message));
  return toHex(new Uint8Array(signature));
}
