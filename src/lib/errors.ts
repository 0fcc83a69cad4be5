/** The closed set of failure kinds Loom reports. Each maps to one HTTP status. */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  validation: 422,
  rate_limited: 429,
  internal: 500,
  provider_failed: 502,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** One field-level validation problem, in the HTTPValidationError item shape. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/**
 * The one error type services throw. The two renderers in app.ts turn it into the
 * Group A envelope `{status: "failed", error}` or the Group B envelope `{detail}`.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly issues?: ValidationIssue[];
  /** A body that replaces the envelope entirely (Group A's three 401 bodies). */
  readonly rawBody?: Record<string, unknown>;
  /** Sent as `Retry-After` (seconds), so a throttled client knows when to come back. */
  readonly retryAfterSeconds?: number;

  constructor(
    code: ErrorCode,
    message: string,
    options: { issues?: ValidationIssue[]; rawBody?: Record<string, unknown>; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.issues = options.issues;
    this.rawBody = options.rawBody;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const badRequest = (message: string): AppError => new AppError("bad_request", message);
export const notFound = (what: string): AppError => new AppError("not_found", `${what} not found`);
export const forbidden = (message: string): AppError => new AppError("forbidden", message);
export const conflict = (message: string): AppError => new AppError("conflict", message);
export const rateLimited = (message: string, retryAfterSeconds: number): AppError =>
  new AppError("rate_limited", message, { retryAfterSeconds });

/**
 * A Group B input the schema alone cannot judge (an unknown role, a body naming no record):
 * answered like every other validation failure, 422 `{detail: [{loc, msg, type}]}`.
 */
export const invalidInput = (loc: (string | number)[], msg: string, type = "value_error"): AppError =>
  // The message is the sentence alone: Group A, whose validation failures are 400 `{error}`, shows it as is.
  new AppError("validation", msg, { issues: [{ loc, msg, type }] });
