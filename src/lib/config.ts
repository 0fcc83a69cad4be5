import type { Env } from "../env";
import { AppError } from "./errors";

type SecretName = "JWT_SECRET" | "ENCRYPTION_KEY";

/**
 * Reads a required secret. A missing one is a deployment mistake, reported as 503 with the
 * secret's name (never its value) so the operator knows what to set.
 */
export function requireSecret(env: Env, name: SecretName): string {
  const value = env[name];
  if (!value || value.length < 16) {
    throw new AppError("unavailable", `server is not configured: set the ${name} secret (at least 16 characters)`);
  }
  return value;
}

export function signupAllowed(env: Env): boolean {
  return (env.ALLOW_SIGNUP ?? "true").toLowerCase() === "true";
}

export function accessTokenTtlSeconds(env: Env): number {
  const parsed = Number(env.ACCESS_TOKEN_TTL_SECONDS ?? "86400");
  return Number.isFinite(parsed) && parsed > 0 ? Math.floor(parsed) : 86400;
}
