import { hmacSha256Hex, toBase64, timingSafeEqual } from "../../lib/crypto";

const encoder = new TextEncoder();

/** Requests to the chat workspace webhook older (or newer) than this are refused as stale. */
export const WORKSPACE_MAX_SKEW_SECONDS = 300;

async function hmacSha1Base64(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-1" }, false, [
    "sign",
  ]);
  return toBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message))));
}

/**
 * The telephony provider's scheme: base64 HMAC-SHA1, keyed with the account's auth token, of the
 * full request URL followed by every POST parameter as name then value, sorted by name.
 */
export function telephonySignature(authToken: string, url: string, params: [string, string][]): Promise<string> {
  const sorted = [...params].sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return hmacSha1Base64(authToken, url + sorted.map(([name, value]) => name + value).join(""));
}

export async function verifyTelephonySignature(
  authToken: string,
  url: string,
  params: [string, string][],
  signature: string,
): Promise<boolean> {
  return timingSafeEqual(await telephonySignature(authToken, url, params), signature);
}

/** The chat workspace's scheme: `v0=` + hex HMAC-SHA256 of `v0:<timestamp>:<raw body>`. */
export async function workspaceSignature(signingSecret: string, timestamp: string, rawBody: string): Promise<string> {
  return `v0=${await hmacSha256Hex(signingSecret, `v0:${timestamp}:${rawBody}`)}`;
}

export type WorkspaceCheck = "ok" | "unsigned" | "stale" | "invalid";

export async function checkWorkspaceRequest(
  signingSecret: string,
  timestamp: string | undefined,
  signature: string | undefined,
  rawBody: string,
  nowSeconds: number,
): Promise<WorkspaceCheck> {
  if (!timestamp || !signature) return "unsigned";
  const sent = Number(timestamp);
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowSeconds - sent) > WORKSPACE_MAX_SKEW_SECONDS) return "stale";
  return timingSafeEqual(await workspaceSignature(signingSecret, timestamp, rawBody), signature) ? "ok" : "invalid";
}

export function escapeXml(text: string): string {
  return text.replace(
    /[<>&'"]/g,
    (ch) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", "'": "&apos;", '"': "&quot;" })[ch] ?? ch,
  );
}
