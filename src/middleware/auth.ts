import type { Context } from "hono";
import { and, eq, isNull, lt, or } from "drizzle-orm";
import type { AppBindings, AuthContext, Role } from "../env";
import { ROLES } from "../env";
import { AppError } from "../lib/errors";
import { verifyToken } from "../lib/signed-token";
import { sha256Hex } from "../lib/crypto";
import { enforceLimit } from "./limits";
import { database, readNearest } from "../db/client";
import { apiKeys, users } from "../db/schema/identity";

/** `api_key`: Group A (API key only); `bearer`: Group B (access token or API key). */
export type AuthMode = "api_key" | "bearer";

const groupA401 = (error: string): AppError => new AppError("unauthorized", error, { rawBody: { error } });

export const API_KEY_PREFIX = "sk_";

export const NOT_AN_API_KEY =
  "Invalid API key: /v1 takes an API key (sk_...) from POST /auth/api-keys; access tokens from /auth/signup or /auth/login are for the routes outside /v1";

/** How often a key's `lastUsedAt` is written: at most once a minute, so busy keys cost no write per request. */
const LAST_USED_EVERY_MS = 60_000;

/**
 * A route's read that rides in the API key's D1 statement (issue 14: one statement instead of a
 * second call, or a second statement of a batch, both of which local D1 and D1's meter pay for). It
 * is built from the request's path alone, before the key is checked and before the body is read,
 * and joined to the key's row, so it is answered only with a valid key: a caller without
 * credentials never sees its rows (it is not even read for them). Never cached. Not used with read
 * replicas (the key is then read through a session): the route reads for itself.
 */
export interface Prefetch {
  /** A SELECT of at most one row, from the request's path parameters only. Its columns must not start with `auth_`. */
  select(c: Context<AppBindings>): { sql: string; params: unknown[] };
  /** The route's rows from the joined row (its columns all null when the SELECT found nothing). */
  rows(joined: Record<string, unknown>): unknown[];
}

/**
 * The key's row, without drizzle's query building on the hot path (every /v1 request): the same
 * read as `keyRead` below, columns renamed `auth_*` so a prefetched row's columns cannot collide.
 */
const KEY_SQL =
  "SELECT k.id AS auth_key_id, k.last_used_at AS auth_last_used_at, k.user_id AS auth_user_id, u.org_id AS auth_org_id, u.role AS auth_role, u.suspended AS auth_suspended FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ? AND k.revoked_at IS NULL LIMIT 1";

interface KeyRow {
  keyId: string;
  lastUsedAt: string | null;
  userId: string;
  orgId: string;
  role: Role;
  suspended: boolean;
}

function keyRowOf(raw: Record<string, unknown>): KeyRow {
  return {
    keyId: raw.auth_key_id as string,
    lastUsedAt: (raw.auth_last_used_at as string | null) ?? null,
    userId: raw.auth_user_id as string,
    orgId: raw.auth_org_id as string,
    role: raw.auth_role as Role,
    suspended: Boolean(raw.auth_suspended),
  };
}

/** The key's row and, with a prefetch, the route's rows: one D1 statement (the route's read LEFT JOINed to the key). */
async function readKey(
  c: Context<AppBindings>,
  hash: string,
  prefetch?: Prefetch,
): Promise<{ row?: KeyRow; prefetched?: unknown[] }> {
  if (!prefetch) {
    const raw = await c.env.DB.prepare(KEY_SQL).bind(hash).first<Record<string, unknown>>();
    return { row: raw ? keyRowOf(raw) : undefined };
  }
  const route = prefetch.select(c);
  const raw = await c.env.DB.prepare(`SELECT * FROM (${KEY_SQL}) LEFT JOIN (${route.sql}) ON 1`)
    .bind(hash, ...route.params)
    .first<Record<string, unknown>>();
  return raw ? { row: keyRowOf(raw), prefetched: prefetch.rows(raw) } : {};
}

async function authFromApiKey(c: Context<AppBindings>, key: string, prefetch?: Prefetch): Promise<AuthContext | null> {
  if (!key.startsWith(API_KEY_PREFIX) || key.length > 200) return null;
  const hash = await sha256Hex(key);
  let row: KeyRow | undefined;
  let prefetched: unknown[] | undefined;
  if (c.env.D1_READ_REPLICAS !== "on") ({ row, prefetched } = await readKey(c, hash, prefetch));
  else {
    // Every /v1 request reads its key: from a replica when one is near (readNearest; a key not found
    // there is read from the primary). Every selected column has its own name: drizzle maps rows by name.
    const rows = await readNearest(c.env, (db) =>
      db
        .select({
          keyId: apiKeys.id,
          lastUsedAt: apiKeys.lastUsedAt,
          userId: apiKeys.userId,
          orgId: users.orgId,
          role: users.role,
          suspended: users.suspended,
        })
        .from(apiKeys)
        .innerJoin(users, eq(users.id, apiKeys.userId))
        .where(and(eq(apiKeys.keyHash, hash), isNull(apiKeys.revokedAt)))
        .limit(1),
    );
    row = rows[0];
  }
  if (!row || row.suspended) return null;
  // Per key, in either group: one key (or one leaked key) cannot flood the service.
  await enforceLimit(
    c.env.API_KEY_LIMITER,
    `api-key:${row.keyId}`,
    "too many requests with this API key; wait a minute and try again",
  );
  await recordUse(c, row.keyId, row.lastUsedAt);
  if (prefetched) c.set("prefetched", prefetched);
  return { userId: row.userId, orgId: row.orgId, role: row.role, via: "api_key", apiKeyId: row.keyId };
}

/** Stamps `lastUsedAt` when it is unset or older than a minute (throttled: one write a minute per key at most). */
async function recordUse(c: Context<AppBindings>, keyId: string, lastUsedAt: string | null): Promise<void> {
  const now = Date.now();
  if (lastUsedAt !== null && now - Date.parse(lastUsedAt) < LAST_USED_EVERY_MS) return;
  const stamp = new Date(now).toISOString();
  const stale = new Date(now - LAST_USED_EVERY_MS).toISOString();
  // The condition repeats the check in SQL so concurrent requests write once, not once each.
  await database(c.env)
    .update(apiKeys)
    .set({ lastUsedAt: stamp })
    .where(and(eq(apiKeys.id, keyId), or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, stale))));
}

async function authFromToken(c: Context<AppBindings>, token: string): Promise<AuthContext | null> {
  // Only an access token: a chatbot visitor's session, signed with the same secret, has another audience.
  const payload = await verifyToken(c.env, "access", token);
  if (typeof payload?.sub !== "string") return null;
  // The user is read on every request, so deletion, suspension and role changes apply at once.
  const rows = await database(c.env)
    .select({ id: users.id, orgId: users.orgId, role: users.role, suspended: users.suspended })
    .from(users)
    .where(eq(users.id, payload.sub))
    .limit(1);
  const row = rows[0];
  if (!row || row.suspended) return null;
  return { userId: row.id, orgId: row.orgId, role: row.role, via: "token" };
}

function bearerCredential(header: string): string | null {
  const match = /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

/** Establishes `c.get("auth")` or throws the mode's 401. */
export async function authenticate(c: Context<AppBindings>, mode: AuthMode, prefetch?: Prefetch): Promise<AuthContext> {
  const header = c.req.header("authorization");
  if (mode === "api_key") {
    if (!header) throw groupA401("Missing authorization header");
    const credential = bearerCredential(header);
    if (!credential) throw groupA401("Invalid authorization header format");
    const auth = await authFromApiKey(c, credential, prefetch);
    // The commonest first mistake is sending the access token from signup or login: say what /v1 takes.
    if (!auth && !credential.startsWith(API_KEY_PREFIX)) throw groupA401(NOT_AN_API_KEY);
    if (!auth) throw groupA401("Invalid API key");
    c.set("auth", auth);
    return auth;
  }
  if (!header) throw new AppError("unauthorized", "Not authenticated");
  const credential = bearerCredential(header);
  if (!credential) throw new AppError("unauthorized", "Invalid authorization header format");
  const auth = credential.startsWith(API_KEY_PREFIX)
    ? await authFromApiKey(c, credential, prefetch)
    : await authFromToken(c, credential);
  if (!auth) throw new AppError("unauthorized", "Could not validate credentials");
  c.set("auth", auth);
  return auth;
}

const ROLE_RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

export function hasRole(auth: AuthContext, least: Role): boolean {
  return ROLE_RANK[auth.role] >= ROLE_RANK[least];
}

export function requireRole(auth: AuthContext, least: Role): void {
  if (!hasRole(auth, least)) throw new AppError("forbidden", `this action needs the ${least} role or higher`);
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
