import { AppError } from "../lib/errors";

/** The fetch a provider client uses. Production passes the global fetch; tests pass a fake server. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** How a provider client reaches its service, and which connection it acts for. */
export interface ProviderTransport {
  /** The connection kind or service family, shown in errors: "openai", "anthropic", "cohere", "workers_ai". */
  provider: string;
  /** The organization's connection name (or "request" for a one-call credential), shown in errors. */
  connection: string;
  fetch: FetchLike;
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

export function transport(partial: Pick<ProviderTransport, "provider" | "connection"> & Partial<ProviderTransport>): ProviderTransport {
  return {
    fetch: (input, init) => fetch(input, init),
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

/** The one error a failed provider becomes: 502, naming the provider and connection, never the key. */
export function providerFailed(t: Pick<ProviderTransport, "provider" | "connection" | "secrets">, reason: string): AppError {
  const detail = scrub(reason, t.secrets).replace(/\s+/g, " ").trim().slice(0, MAX_ERROR_DETAIL);
  return new AppError("provider_failed", `the model provider ${t.provider} (connection '${t.connection}') failed: ${detail}`);
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

async function errorDetail(response: Response): Promise<string> {
  const body = await response.text().catch(() => "");
  let message = body;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string; message?: string; detail?: string };
    message = (typeof parsed.error === "string" ? parsed.error : parsed.error?.message) ?? parsed.message ?? parsed.detail ?? body;
  } catch {
    // Not JSON: keep the raw text, scrubbed and truncated by providerFailed.
  }
  return `HTTP ${response.status}${message ? `: ${message}` : ""}`;
}

/**
 * Sends one request with a deadline and bounded retries on 429, 5xx and network failures, and
 * answers the successful response. The caller owns the returned deadline while reading a stream.
 */
export async function send(t: ProviderTransport, url: string, init: RequestInit, signal?: AbortSignal): Promise<{ response: Response; deadline: IdleDeadline }> {
  const sleep = t.sleep ?? defaultSleep;
  let lastReason = "no attempt made";
  for (let attempt = 0; attempt <= t.maxRetries; attempt++) {
    const deadline = new IdleDeadline(t.timeoutMs, signal);
    let response: Response;
    try {
      response = await t.fetch(url, { ...init, signal: deadline.signal });
    } catch (error) {
      deadline.dispose();
      if (signal?.aborted) throw providerFailed(t, "the request was aborted");
      lastReason = deadline.timedOut ? `no answer within ${t.timeoutMs} ms` : `network error: ${error instanceof Error ? error.message : String(error)}`;
      if (attempt < t.maxRetries) await sleep(backoffMs(t, attempt, null));
      continue;
    }
    if (response.ok) return { response, deadline };
    deadline.dispose();
    lastReason = await errorDetail(response);
    if (!retryable(response.status) || attempt === t.maxRetries) break;
    await sleep(backoffMs(t, attempt, response.headers.get("retry-after")));
  }
  const error = providerFailed(t, lastReason);
  // The log names the provider and the scrubbed reason only; keys never reach it.
  console.warn(JSON.stringify({ event: "provider_failed", provider: t.provider, connection: t.connection, message: error.message }));
  throw error;
}

/** Sends a JSON request and parses the JSON answer; a body that is not JSON is a provider failure. */
export async function sendJson<T>(t: ProviderTransport, url: string, init: RequestInit, signal?: AbortSignal): Promise<T> {
  const { response, deadline } = await send(t, url, init, signal);
  try {
    return (await response.json()) as T;
  } catch {
    throw providerFailed(t, "the answer was not valid JSON");
  } finally {
    deadline.dispose();
  }
}

/** Joins a base URL and a path without doubling or losing slashes. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}
