import { AppError } from "../lib/errors";

/**
 * Counts one event against a rate-limit binding and answers 429 past its limit. A deployment
 * without the binding is not limited (the binding is configured in wrangler.toml).
 */
export async function enforceLimit(limiter: RateLimit | undefined, key: string, message: string): Promise<void> {
  if (!limiter) return;
  const { success } = await limiter.limit({ key });
  if (!success) throw new AppError("rate_limited", message);
}
