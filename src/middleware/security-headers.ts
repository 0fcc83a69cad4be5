import type { Context, MiddlewareHandler } from "hono";
import { secureHeaders } from "hono/secure-headers";
import type { AppBindings } from "../env";
import { toBase64 } from "../lib/crypto";

/** What one HTML page may load and who may frame it. Every list holds CSP source expressions. */
export interface PagePolicy {
  /** Inline scripts and styles are allowed by hash only (`cspHash`); there is no 'unsafe-inline'. */
  scripts?: string[];
  styles?: string[];
  /** Where the page's own `fetch` may go; default: nowhere. */
  connect?: string[];
  images?: string[];
  /** Origins (`https://shop.example`) that may put the page in a frame; default: nobody. */
  frameAncestors?: string[];
}

/**
 * A source expression: a quoted keyword or hash, a bare origin, or the `data:` scheme (which a
 * page opts into per directive: /docs for Swagger UI's inline icons). Anything else could smuggle
 * in a directive.
 */
const SOURCE = /^(?:'(?:self|none|sha256-[A-Za-z0-9+/]+={0,2})'|https?:\/\/[A-Za-z0-9.-]+(?::\d{1,5})?|data:)$/;

function sources(list: string[] | undefined): string {
  const safe = (list ?? []).filter((source) => SOURCE.test(source));
  return safe.length > 0 ? safe.join(" ") : "'none'";
}

/**
 * The Content-Security-Policy for a page: nothing loads unless listed, no plugins, no <base>, no
 * form posts, and no framing unless `frameAncestors` names the sites that may.
 */
export function pageSecurityPolicy(policy: PagePolicy = {}): string {
  return [
    "default-src 'none'",
    `script-src ${sources(policy.scripts)}`,
    `style-src ${sources(policy.styles)}`,
    `connect-src ${sources(policy.connect)}`,
    `img-src ${sources(policy.images)}`,
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${sources(policy.frameAncestors)}`,
  ].join("; ");
}

/** The CSP hash source of an inline script or style, exactly as the page contains it. */
export async function cspHash(inline: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(inline));
  return `'sha256-${toBase64(new Uint8Array(digest))}'`;
}

/**
 * Sets this response's page policy in place of the default. A page that may be framed (the chat
 * page: its chatbot's allowed origins) passes `frameAncestors`; X-Frame-Options, which cannot name
 * several origins, is then left off.
 */
export function setPagePolicy(c: Context, policy: PagePolicy): void {
  c.header("Content-Security-Policy", pageSecurityPolicy(policy));
}

const hardened = secureHeaders({
  // A route's own headers (its page policy, a cross-origin resource policy for a script meant to be
  // embedded elsewhere) are kept.
  overwrite: false,
  xFrameOptions: false,
  referrerPolicy: "no-referrer",
  contentSecurityPolicy: undefined,
});

/**
 * Every response: `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and hono's
 * other hardening headers; a route without its own page policy gets the strictest one (which also
 * fits JSON: nothing may load and nobody may frame it), with `X-Frame-Options: DENY` for browsers
 * that predate frame-ancestors.
 */
export const securityHeaders: MiddlewareHandler<AppBindings> = async (c, next) => {
  await hardened(c, next);
  const headers = c.res.headers;
  if (!headers.has("content-security-policy")) headers.set("content-security-policy", pageSecurityPolicy());
  if (/frame-ancestors 'none'/.test(headers.get("content-security-policy") ?? "") && !headers.has("x-frame-options"))
    headers.set("x-frame-options", "DENY");
};
