import type { Env } from "../env";
import { AppError } from "./errors";
import { parseHostList, type UrlRules } from "./ssrf-guard";

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
  return intSetting(env.ACCESS_TOKEN_TTL_SECONDS, 86400);
}

/** A positive whole-number setting from a variable; anything else (absent, not a number, 0 or less) gives the default. */
export function intSetting(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && Number.isFinite(n) && n > 0 ? Math.floor(n) : fallback;
}

/**
 * Chunks one knowledge base may hold. With Loom's own vector index the base is split over index
 * shards (each a Durable Object splitting past KB_SHARD_SPLIT_CHUNKS, its vectors in that object's
 * 128 MB), so the limit is the whole base's, not one object's. With Vectorize the index's own
 * limit applies.
 */
export function maxChunksPerKnowledgeBase(env: Env): number {
  const vectorize = (env.KB_VECTOR_BACKEND ?? "durable-object") === "vectorize";
  return intSetting(env.KB_MAX_CHUNKS, vectorize ? 1_000_000 : 10_000_000);
}

/**
 * Where an organization's model connections may point: any public named host over https, plus the
 * local model servers the operator lists in ALLOW_PRIVATE_MODEL_HOSTS (`localhost:11434,gpu-box.lan:8000`),
 * which may be private addresses and may use http.
 */
export function modelHostRules(env: Env): UrlRules {
  return { publicHosts: true, trustedHosts: parseHostList(env.ALLOW_PRIVATE_MODEL_HOSTS) };
}

/**
 * Read replicas per index shard (docs/knowledge-bases.md, "Read replicas"): 0 (default) reads
 * only primaries; at most 16.
 */
export function readReplicas(env: Env): number {
  return Math.min(16, intSetting(env.KB_READ_REPLICAS, 0));
}
