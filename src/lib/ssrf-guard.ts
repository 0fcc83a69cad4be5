import { AppError } from "./errors";

/**
 * The one way Loom fetches a URL on a user's behalf. Only https, only hosts on the caller's
 * allow-list, no IP literals in any spelling, no credentials in the URL, every redirect checked
 * against the same rules, and caps on size and time. The fetch function is injected so tests
 * replay recorded responses instead of reaching the network.
 */
export type FetchFunction = (input: Request | string | URL, init?: RequestInit) => Promise<Response>;

export interface GuardedFetchOptions {
  /** Exact host names, or `*.example.org` for any subdomain of example.org. */
  allowHosts: readonly string[];
  maxBytes: number;
  timeoutMs: number;
  maxRedirects?: number;
  fetch?: FetchFunction;
  headers?: Record<string, string>;
}

export class BlockedUrlError extends AppError {
  constructor(reason: string) {
    super("bad_request", `refused to fetch: ${reason}`);
  }
}

const IPV4_DOTTED = /^\d{1,3}(\.\d{1,3}){3}$/;
/** Hosts the WHATWG parser would read as IPv4 (decimal, hex, octal, short forms). */
const IPV4_LIKE = /^(0x[0-9a-f]*|\d+)(\.(0x[0-9a-f]*|\d+)){0,3}\.?$/i;

export function isIpLiteral(host: string): boolean {
  const h = host.toLowerCase();
  return h.startsWith("[") || h.includes(":") || IPV4_DOTTED.test(h) || IPV4_LIKE.test(h);
}

function hostAllowed(host: string, allowHosts: readonly string[]): boolean {
  return allowHosts.some((rule) => (rule.startsWith("*.") ? host.endsWith(rule.slice(1)) && host.length > rule.length - 1 : host === rule));
}

/** Throws BlockedUrlError unless `raw` is a URL Loom may fetch. */
export function checkUrl(raw: string, allowHosts: readonly string[]): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BlockedUrlError("not a valid URL");
  }
  if (url.protocol !== "https:") throw new BlockedUrlError("only https URLs are allowed");
  if (url.username || url.password) throw new BlockedUrlError("URLs with credentials are not allowed");
  if (url.port && url.port !== "443") throw new BlockedUrlError("only the default https port is allowed");
  // Check the authority as written too: the parser turns 0x7f.1 or 2130706433 into 127.0.0.1.
  const written = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(raw.trim())?.[1] ?? "";
  const writtenHost = written.replace(/^.*@/, "").replace(/:\d*$/, "");
  if (isIpLiteral(url.hostname) || isIpLiteral(writtenHost) || /%[0-9a-f]{2}/i.test(writtenHost)) throw new BlockedUrlError("IP addresses are not allowed, only named hosts");
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (!hostAllowed(host, allowHosts)) throw new BlockedUrlError(`host ${host} is not on the allow-list`);
  return url;
}

async function readCapped(response: Response, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw new AppError("payload_too_large", `the fetched resource exceeds ${maxBytes} bytes`);
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      throw new AppError("payload_too_large", `the fetched resource exceeds ${maxBytes} bytes`);
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

export interface GuardedResponse {
  url: string;
  status: number;
  contentType: string;
  body: Uint8Array;
}

/** Fetches `raw` under the guard; follows at most `maxRedirects` redirects, each one checked. */
export async function guardedFetch(raw: string, options: GuardedFetchOptions): Promise<GuardedResponse> {
  const doFetch = options.fetch ?? fetch;
  const signal = AbortSignal.timeout(options.timeoutMs);
  let url = checkUrl(raw, options.allowHosts);
  for (let hop = 0; ; hop++) {
    let response: Response;
    try {
      response = await doFetch(url.toString(), { redirect: "manual", signal, headers: { "user-agent": "Loom/0.1 (knowledge-base ingestion)", ...options.headers } });
    } catch (error) {
      if (signal.aborted) throw new AppError("provider_failed", `fetching ${url.hostname} timed out after ${options.timeoutMs} ms`);
      throw new AppError("provider_failed", `fetching ${url.hostname} failed: ${error instanceof Error ? error.message : "network error"}`);
    }
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get("location");
      await response.body?.cancel();
      if (!location) throw new AppError("provider_failed", `${url.hostname} answered a redirect without a location`);
      if (hop >= (options.maxRedirects ?? 3)) throw new BlockedUrlError("too many redirects");
      url = checkUrl(new URL(location, url).toString(), options.allowHosts);
      continue;
    }
    const body = await readCapped(response, options.maxBytes);
    return { url: url.toString(), status: response.status, contentType: response.headers.get("content-type") ?? "", body };
  }
}
