/**
 * Loom's log lines: one JSON object per line on the console, which `npm start` prints and
 * `wrangler tail` (and Workers Logs) collects and can filter by field. `LOG_LEVEL` (debug, info,
 * warn, error, off; default info) drops the lines below it. Callers pass identifiers and numbers,
 * never a request body, a header or a secret.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel | "off", number> = { debug: 10, info: 20, warn: 30, error: 40, off: 99 };

export const DEFAULT_LOG_LEVEL = "info";

/** The configured threshold; an unknown value falls back to the default rather than silencing logs. */
export function logThreshold(configured: string | undefined): number {
  const name = (configured ?? "").trim().toLowerCase();
  return name in RANK ? RANK[name as LogLevel | "off"] : RANK[DEFAULT_LOG_LEVEL];
}

export function log(
  configured: string | undefined,
  level: LogLevel,
  event: string,
  fields: Record<string, unknown>,
): void {
  if (RANK[level] < logThreshold(configured)) return;
  const line = JSON.stringify({ level, event, ...fields });
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

/**
 * The deployment's LOG_LEVEL for code with no `env` at hand (provider clients, Durable Object
 * helpers, the parser and sandbox hosts). Every entry point sets it from its env (the access-log
 * middleware, each Durable Object's constructor); all of one deployment's entry points share one
 * value, and before any has run the default applies.
 */
let isolateLevel: string | undefined;

export function setIsolateLogLevel(configured: string | undefined): void {
  isolateLevel = configured;
}

/** A log line at the level the isolate's entry point configured (see setIsolateLogLevel). */
export function logEvent(level: LogLevel, event: string, fields: Record<string, unknown>): void {
  log(isolateLevel, level, event, fields);
}

/** "Name: message" for an error and each `cause` under it (at most 5), so a log line says why, not only what. */
export function causeChain(error: unknown): string[] {
  const chain: string[] = [];
  let current: unknown = error;
  while (current !== undefined && current !== null && chain.length < 5) {
    chain.push(current instanceof Error ? `${current.name}: ${current.message}` : String(current));
    current = current instanceof Error ? current.cause : undefined;
  }
  return chain;
}
