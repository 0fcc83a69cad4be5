/** Signs webhook requests the way the providers do, written apart from the server's code. */
const encoder = new TextEncoder();

async function hmac(hash: "SHA-1" | "SHA-256", secret: string, message: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}

export async function signTelephony(authToken: string, url: string, params: Record<string, string>): Promise<string> {
  const data = Object.keys(params)
    .sort()
    .map((k) => k + params[k])
    .join("");
  return btoa(String.fromCharCode(...(await hmac("SHA-1", authToken, url + data))));
}

export async function signWorkspace(secret: string, timestamp: number, rawBody: string): Promise<string> {
  const bytes = await hmac("SHA-256", secret, `v0:${timestamp}:${rawBody}`);
  return `v0=${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export const TELEPHONY_TOKEN = "telephony-auth-token-1234";
export const WORKSPACE_SIGNING = "workspace-signing-secret-5678";
export const WORKSPACE_BOT_TOKEN = "xoxb-workspace-bot-token-9999";
