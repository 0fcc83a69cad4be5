import { AppError } from "./errors";
import { BlockedUrlError, checkUrl, type UrlRules } from "./ssrf-guard";

/**
 * The one way Loom sends a request to another server. Every outbound call (model providers,
 * knowledge-base sources, chat workspace replies) goes through `egressFetch`, which:
 * - checks the URL against the caller's rules (ssrf-guard.ts) before anything is sent;
 * - follows redirects itself, checking each target, and never carries credentials to another origin;
 * - caps the response body and, when asked, the time until the answer arrives;
 * - words its own errors with the host and status only, never the upstream body.
 * The underlying fetch is injected so tests reach fake servers through these same checks.
 */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;
/** The wider fetch signature some callers hold (the global fetch has it); usable wherever FetchLike is. */
export type FetchFunction = (input: Request | string | URL, init?: RequestInit) => Promise<Response>;

export interface EgressOptions {
  rules: UrlRules;
  /** Largest response body read; past it the body errors with `EgressError` ("exceeded ... bytes"). */
  maxBytes: number;
  /** Deadline for the whole exchange, body included. The caller's `init.signal` is honoured too. */
  timeoutMs?: number;
  /** Redirects followed, each one checked (default 3). */
  maxRedirects?: number;
  fetch?: FetchLike;
}

/** An exchange Loom stopped or an upstream that broke the rules; a 502 naming the host, never its body. */
export class EgressError extends AppError {
  constructor(
    message: string,
    readonly reason: "redirect_refused" | "too_many_redirects" | "too_large" | "timed_out",
    /** For a refused redirect: why its target was refused. */
    readonly blocked?: BlockedUrlError,
  ) {
    super("provider_failed", message);
  }
}

const DEFAULT_MAX_REDIRECTS = 3;
/** Headers that carry credentials: dropped when a redirect leaves the origin they were meant for. */
const CREDENTIAL_HEADERS = ["authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"];

/** The response body, cut off with an error once it passes `maxBytes`. */
function capped(body: ReadableStream<Uint8Array>, maxBytes: number, host: string): ReadableStream<Uint8Array> {
  let total = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        total += chunk.byteLength;
        if (total > maxBytes)
          controller.error(new EgressError(`the answer from ${host} exceeded ${maxBytes} bytes`, "too_large"));
        else controller.enqueue(chunk);
      },
    }),
  );
}

function redirectedInit(init: RequestInit, status: number, sameOrigin: boolean): RequestInit {
  const next: RequestInit = { ...init };
  // As browsers do: 303, and 301/302 after a POST, continue as GET without the body.
  if (status === 303 || ((status === 301 || status === 302) && (init.method ?? "GET").toUpperCase() === "POST")) {
    next.method = "GET";
    delete next.body;
  }
  if (!sameOrigin) {
    const headers = new Headers(init.headers);
    for (const name of CREDENTIAL_HEADERS) headers.delete(name);
    next.headers = headers;
  }
  return next;
}

/** A Location header made absolute; one that cannot be is passed on as written, for checkUrl to refuse. */
function resolveLocation(location: string, base: URL): string {
  try {
    return new URL(location, base).toString();
  } catch {
    return location;
  }
}

function linkedSignal(outer: AbortSignal | null | undefined, timeoutMs: number | undefined): AbortSignal | undefined {
  const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  if (outer && timeout) return AbortSignal.any([outer, timeout]);
  return outer ?? timeout;
}

/**
 * Sends `init` to `raw` under `options.rules` and answers the final (non-redirect) response with
 * its body capped. Throws BlockedUrlError (400) for a refused URL before anything is sent, and
 * EgressError (502) for a refused redirect or a timeout; network errors pass through unchanged.
 */
export async function egressFetch(raw: string, init: RequestInit, options: EgressOptions): Promise<Response> {
  return (await egressExchange(raw, init, options)).response;
}

/** egressFetch, also answering the URL the final response came from (after redirects). */
export async function egressExchange(
  raw: string,
  init: RequestInit,
  options: EgressOptions,
): Promise<{ response: Response; url: URL }> {
  const doFetch: FetchLike = options.fetch ?? ((input, requestInit) => fetch(input, requestInit));
  const signal = linkedSignal(init.signal, options.timeoutMs);
  const timedOut = (): boolean => options.timeoutMs !== undefined && Boolean(signal?.aborted) && !init.signal?.aborted;
  let url = checkUrl(raw, options.rules);
  let hopInit: RequestInit = init;
  for (let hop = 0; ; hop++) {
    let response: Response;
    try {
      response = await doFetch(url.toString(), { ...hopInit, redirect: "manual", ...(signal ? { signal } : {}) });
    } catch (error) {
      if (timedOut())
        throw new EgressError(`fetching ${url.hostname} timed out after ${options.timeoutMs} ms`, "timed_out");
      throw error;
    }
    const location = response.status >= 300 && response.status < 400 ? response.headers.get("location") : null;
    if (location === null) {
      const declared = Number(response.headers.get("content-length") ?? "0");
      if (declared > options.maxBytes) {
        await response.body?.cancel();
        throw new EgressError(`the answer from ${url.hostname} exceeded ${options.maxBytes} bytes`, "too_large");
      }
      if (!response.body || [101, 204, 205, 304].includes(response.status)) return { response, url };
      return {
        response: new Response(capped(response.body, options.maxBytes, url.hostname), {
          status: response.status,
          statusText: response.statusText,
          headers: response.headers,
        }),
        url,
      };
    }
    await response.body?.cancel();
    if (hop >= (options.maxRedirects ?? DEFAULT_MAX_REDIRECTS))
      throw new EgressError(`${url.hostname} redirected too many times`, "too_many_redirects");
    let next: URL;
    try {
      next = checkUrl(resolveLocation(location, url), options.rules);
    } catch (error) {
      if (!(error instanceof BlockedUrlError)) throw error;
      throw new EgressError(
        `${url.hostname} answered ${response.status} with a redirect Loom refused to follow (${error.reason})`,
        "redirect_refused",
        error,
      );
    }
    hopInit = redirectedInit(hopInit, response.status, next.origin === url.origin);
    url = next;
  }
}

export interface GuardedResponse {
  status: number;
  contentType: string;
  body: Uint8Array;
}

/** The user agent of every knowledge-base fetch; robots.txt rules for `Loom` apply to it. */
export const INGESTION_USER_AGENT = "Loom/0.1 (knowledge-base ingestion)";

/**
 * Fetches `raw` from one of `allowHosts` (or under `rules`, for open-ended web pages) through
 * egressFetch and reads the whole (capped) body, with the knowledge-base sources' errors: a
 * refused URL or redirect is a 400, a body past the cap a 413.
 */
export async function guardedFetch(
  raw: string,
  options: ({ allowHosts: readonly string[] } | { rules: UrlRules }) & {
    maxBytes: number;
    timeoutMs: number;
    maxRedirects?: number;
    fetch?: FetchFunction;
    headers?: Record<string, string>;
  },
): Promise<GuardedResponse & { url: string }> {
  const rules: UrlRules = "rules" in options ? options.rules : { allowHosts: options.allowHosts };
  const url = checkUrl(raw, rules);
  try {
    const { response, url: finalUrl } = await egressExchange(
      raw,
      { headers: { "user-agent": INGESTION_USER_AGENT, ...options.headers } },
      {
        rules,
        maxBytes: options.maxBytes,
        timeoutMs: options.timeoutMs,
        maxRedirects: options.maxRedirects,
        fetch: options.fetch,
      },
    );
    const body = new Uint8Array(await response.arrayBuffer());
    return {
      status: response.status,
      contentType: response.headers.get("content-type") ?? "",
      body,
      url: finalUrl.toString(),
    };
  } catch (error) {
    if (error instanceof EgressError && error.reason === "too_large")
      throw new AppError("payload_too_large", `the fetched resource exceeds ${options.maxBytes} bytes`);
    if (error instanceof EgressError && error.blocked) throw error.blocked;
    if (error instanceof EgressError && error.reason === "too_many_redirects")
      throw new BlockedUrlError("too many redirects");
    if (error instanceof AppError) throw error;
    throw new AppError(
      "provider_failed",
      `fetching ${url.hostname} failed: ${error instanceof Error ? error.message : "network error"}`,
    );
  }
}
