import { AppError, badRequest } from "../lib/errors";
import { EgressError, egressFetch, type FetchLike } from "../lib/egress";
import { BlockedUrlError, type UrlRules } from "../lib/ssrf-guard";
import { logEvent } from "../lib/log";

export type { FetchLike };

/** How a provider client reaches its service, and which connection it acts for. */
export interface ProviderTransport {
  /** The connection kind or service family, shown in errors: "openai", "anthropic", "cohere", "workers_ai". */
  provider: string;
  /** The organization's connection name (or "request" for a one-call credential), shown in errors. */
  connection: string;
  /** Which URLs this transport may reach (checked before every request and redirect). */
  rules: UrlRules;
  /** The network under the egress checks. Production leaves it unset (the global fetch); tests pass a fake server. */
  fetch?: FetchLike;
  /** Per attempt: until the response headers arrive, then between stream chunks. */
  timeoutMs: number;
  /** Extra attempts after a 429, a 5xx or a network failure. Bounded so a dead provider fails fast. */
  maxRetries: number;
  /** First backoff delay; doubled per retry, with jitter, capped at MAX_BACKOFF_MS. */
  retryBaseMs: number;
  /** Secrets this transport carries, so error text from the provider can be scrubbed of them. */
  secrets: readonly string[];
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_RETRY_BASE_MS = 400;
const MAX_BACKOFF_MS = 8_000;
const MAX_ERROR_DETAIL = 200;
/** Largest answer read from a provider: 96 embeddings of 3072 dimensions as JSON are about 6 MB. */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export function transport(
  partial: Pick<ProviderTransport, "provider" | "connection" | "rules"> & Partial<ProviderTransport>,
): ProviderTransport {
  return {
    timeoutMs: DEFAULT_TIMEOUT_MS,
    maxRetries: DEFAULT_MAX_RETRIES,
    retryBaseMs: DEFAULT_RETRY_BASE_MS,
    secrets: [],
    ...partial,
  };
}

/** Removes every known secret, and anything shaped like a bearer key, from text a provider sent back. */
export function scrub(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) {
    if (secret.length >= 4) clean = clean.split(secret).join("[redacted]");
  }
  // Providers echo partial keys ("Incorrect API key provided: sk-abc***xyz"); drop key-shaped words too.
  return clean.replace(/\b(sk|pk|rk|key|api|co)[-_][A-Za-z0-9_\-*.]{6,}/gi, "[redacted]");
}

/**
 * The one error a failed provider becomes: 502, naming the provider and connection, never the key.
 * `reason` is Loom's own wording (a status, a timeout, a broken stream), never text the provider
 * sent: an upstream body could be anything the URL's server chose to say.
 */
export function providerFailed(
  t: Pick<ProviderTransport, "provider" | "connection" | "secrets">,
  reason: string,
): AppError {
  const detail = scrub(reason, t.secrets).replace(/\s+/g, " ").trim().slice(0, MAX_ERROR_DETAIL);
  return new AppError(
    "provider_failed",
    `the model provider ${t.provider} (connection '${t.connection}') failed: ${detail}`,
  );
}

function retryable(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

function backoffMs(t: ProviderTransport, attempt: number, retryAfter: string | null): number {
  const seconds = retryAfter ? Number(retryAfter) : Number.NaN;
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_BACKOFF_MS);
  const base = t.retryBaseMs * 2 ** attempt;
  return Math.min(base / 2 + Math.random() * (base / 2), MAX_BACKOFF_MS);
}

const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An abort that fires on the caller's signal or after `ms` of silence; `touch()` restarts the clock. */
export class IdleDeadline {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onOuterAbort = (): void => this.controller.abort(new Error("aborted by caller"));

  constructor(
    private readonly ms: number,
    private readonly outer?: AbortSignal,
  ) {
    if (outer?.aborted) this.controller.abort(new Error("aborted by caller"));
    outer?.addEventListener("abort", this.onOuterAbort);
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get timedOut(): boolean {
    return this.controller.signal.aborted && !this.outer?.aborted;
  }

  touch(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.controller.abort(new Error("timed out")), this.ms);
  }

  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.outer?.removeEventListener("abort", this.onOuterAbort);
  }
}

/** What a failed status means, in Loom's words. */
const STATUS_HINTS: Record<number, string> = {
  400: "the provider refused the request",
  401: "the provider refused the credentials",
  403: "the provider refused the credentials",
  404: "no such endpoint or model at the connection's base_url",
  413: "the request was too large for the provider",
  429: "rate limited by the provider",
};

/**
 * The client sees the status only; the operator's log also gets the start of the body, scrubbed
 * of secrets, since it usually says what went wrong ("invalid x-api-key").
 */
async function failedStatus(t: ProviderTransport, response: Response): Promise<string> {
  const body = await response.text().catch(() => "");
  const hint = STATUS_HINTS[response.status];
  const reason = `HTTP ${response.status}${hint ? ` (${hint})` : ""}`;
  logEvent("warn", "provider_status", {
    provider: t.provider,
    connection: t.connection,
    status: response.status,
    upstream: scrub(body, t.secrets).replace(/\s+/g, " ").slice(0, MAX_ERROR_DETAIL),
  });
  return reason;
}

/**
 * Sends one request with a deadline and bounded retries on 429, 5xx and network failures, and
 * answers the successful response. The caller owns the returned deadline while reading a stream.
 */
export async function send(
  t: ProviderTransport,
  url: string,
  init: RequestInit,
  signal?: AbortSignal,
): Promise<{ response: Response; deadline: IdleDeadline }> {
  const sleep = t.sleep ?? defaultSleep;
  let lastReason = "no attempt made";
  for (let attempt = 0; attempt <= t.maxRetries; attempt++) {
    const deadline = new IdleDeadline(t.timeoutMs, signal);
    let response: Response;
    try {
      response = await egressFetch(
        url,
        { ...init, signal: deadline.signal },
        { rules: t.rules, maxBytes: MAX_RESPONSE_BYTES, fetch: t.fetch },
      );
    } catch (error) {
      deadline.dispose();
      // A refused URL is the connection's configuration, not a provider failure: no retry.
      if (error instanceof BlockedUrlError)
        throw badRequest(`connection '${t.connection}': ${error.message} (check its base_url)`);
      if (error instanceof EgressError) throw providerFailed(t, error.message);
      if (signal?.aborted) throw providerFailed(t, "the request was aborted");
      lastReason = deadline.timedOut
        ? `no answer within ${t.timeoutMs} ms`
        : `network error: ${error instanceof Error ? error.message : String(error)}`;
      if (attempt < t.maxRetries) await sleep(backoffMs(t, attempt, null));
      continue;
    }
    if (response.ok) return { response, deadline };
    deadline.dispose();
    lastReason = await failedStatus(t, response);
    if (!retryable(response.status) || attempt === t.maxRetries) break;
    await sleep(backoffMs(t, attempt, response.headers.get("retry-after")));
  }
  const error = providerFailed(t, lastReason);
  // The log names the provider and the scrubbed reason only; keys never reach it.
  logEvent("warn", "provider_failed", { provider: t.provider, connection: t.connection, message: error.message });
  throw error;
}

/** Sends a JSON request and parses the JSON answer; a body that is not JSON is a provider failure. */
export async function sendJson<T>(
  t: ProviderTransport,
  url: string,
  init: RequestInit,
  signal?: AbortSignal,
): Promise<T> {
  const { response, deadline } = await send(t, url, init, signal);
  try {
    return (await response.json()) as T;
  } catch (error) {
    if (error instanceof EgressError) throw providerFailed(t, error.message);
    throw providerFailed(t, "the answer was not valid JSON");
  } finally {
    deadline.dispose();
  }
}

/** Joins a base URL and a path without doubling or losing slashes. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}
