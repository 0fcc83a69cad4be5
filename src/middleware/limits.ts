import { rateLimited } from "../lib/errors";

/**
 * How long a throttled client is told to wait. A Workers rate limit counts in windows of 10 or 60
 * seconds and the binding does not say which, so the answer is the longer one: never too early.
 */
export const RETRY_AFTER_SECONDS = 60;

/**
 * Counts one event against a rate-limit binding and answers 429 (with `Retry-After`) past its
 * limit. A deployment without the binding is not limited: the bindings and their limits are
 * declared in wrangler.toml (`[[ratelimits]]`).
 */
export async function enforceLimit(limiter: RateLimit | undefined, key: string, message: string): Promise<void> {
  if (!limiter) return;
  const { success } = await limiter.limit({ key });
  if (!success) throw rateLimited(message, RETRY_AFTER_SECONDS);
}
