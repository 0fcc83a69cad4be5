import { and, eq, isNull, or } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { apiKeys, organizations, users } from "../../db/schema/identity";
import { AppError, conflict, forbidden, notFound } from "../../lib/errors";
import { hashPassword, randomBytes, sha256Hex, verifyPassword, verifyPasswordAgainstNothing } from "../../lib/crypto";
import { assertPasswordNotCommon } from "../../lib/password-policy";
import { enforceLimit } from "../../middleware/limits";
import { newId, toHex } from "../../lib/ids";
import { accessTokenTtlSeconds, signupAllowed } from "../../lib/config";
import { signToken } from "../../lib/signed-token";
import { API_KEY_PREFIX } from "../../middleware/auth";
import { auditInsert } from "../audit/audit.service";

type UserRow = typeof users.$inferSelect;

/** A user as every response shows it: no password hash. */
export function userRecord(row: UserRow) {
  return {
    _id: row.id,
    email: row.email,
    username: row.username,
    name: row.name,
    role: row.role,
    suspended: row.suspended,
    orgId: row.orgId,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

export function issueAccessToken(env: Env, user: Pick<UserRow, "id" | "orgId">): Promise<string> {
  return signToken(env, "access", { sub: user.id, org: user.orgId }, accessTokenTtlSeconds(env));
}

export interface SignupInput {
  email: string;
  password: string;
  username?: string;
  name?: string;
  organization?: string;
}

export async function signup(env: Env, input: SignupInput) {
  if (!signupAllowed(env)) throw forbidden("sign-up is switched off on this server; ask an administrator to add you");
  await assertPasswordNotCommon(input.password);
  const db = database(env);
  const email = input.email.toLowerCase();
  const orgName = input.organization?.trim() || `${input.username ?? email.split("@")[0]}'s organization`;
  const taken = await db
    .select({ id: users.id })
    .from(users)
    .where(input.username ? or(eq(users.email, email), eq(users.username, input.username)) : eq(users.email, email))
    .limit(1);
  if (taken.length) throw conflict("a user with that email or username already exists");
  const existingOrg = await db
    .select({ id: organizations.id })
    .from(organizations)
    .where(eq(organizations.name, orgName))
    .limit(1);
  // Joining an existing organization needs one of its admins (POST /admin/users/add), never self-service.
  if (existingOrg.length)
    throw conflict(`organization '${orgName}' already exists; ask one of its administrators to add you`);

  const now = new Date().toISOString();
  const org = { id: newId(), name: orgName, createdAt: now };
  const user: UserRow = {
    id: newId(),
    orgId: org.id,
    email,
    username: input.username ?? null,
    name: input.name ?? input.username ?? "",
    passwordHash: await hashPassword(input.password),
    role: "owner",
    suspended: false,
    createdAt: now,
    updatedAt: now,
  };
  const auth: AuthContext = { userId: user.id, orgId: org.id, role: "owner", via: "token" };
  await writeUnique(
    () =>
      db.batch([
        db.insert(organizations).values(org),
        db.insert(users).values(user),
        auditInsert(env, auth, {
          action: "organization.create",
          targetType: "organization",
          targetId: org.id,
          details: { name: orgName },
        }),
      ]),
    "a user or organization with that name already exists",
  );
  return {
    access_token: await issueAccessToken(env, user),
    token_type: "bearer" as const,
    user: { ...userRecord(user), organization: orgName },
  };
}

/** One answer for every refused login (unknown account, wrong password, suspended), so none is an oracle. */
const refused = (): AppError => new AppError("unauthorized", "Incorrect username or password");

/**
 * Password grant. `client` is the caller's identity (middleware/client-identity.ts). Attempts are
 * counted per account, whichever spelling (email in any case, or username) names it:
 * - per account and client (LOGIN_LIMITER): one client guessing one account is slow, and it
 *   throttles only itself, so nobody locks the owner out by failing on purpose;
 * - per account across clients (LOGIN_ACCOUNT_LIMITER): a much higher ceiling, so many clients
 *   together still cannot guess fast; reaching it takes a sustained flood from many addresses.
 * The per-client limit over all accounts is counted by the route, before any lookup.
 */
export async function login(env: Env, username: string, password: string, client: string) {
  const spelled = username.trim();
  const rows = await database(env)
    .select()
    .from(users)
    .where(or(eq(users.email, spelled.toLowerCase()), eq(users.username, spelled)))
    .limit(1);
  const user = rows[0];
  const account = user ? `user:${user.id}` : `unknown:${spelled.toLowerCase()}`;
  const message = "too many login attempts for this account; wait a minute and try again";
  await enforceLimit(env.LOGIN_ACCOUNT_LIMITER, `login-account:${account}`, message);
  await enforceLimit(env.LOGIN_LIMITER, `login:${account}:${client}`, message);
  // The same key derivation runs whether or not the account exists, so timing does not tell.
  const ok = user ? await verifyPassword(password, user.passwordHash) : await verifyPasswordAgainstNothing(password);
  // A suspended account answers as a wrong password does (after the same work), so a correct
  // guess against it is not confirmed.
  if (!user || !ok || user.suspended) throw refused();
  return { access_token: await issueAccessToken(env, user), token_type: "bearer" as const };
}

export async function currentUser(env: Env, auth: AuthContext) {
  const rows = await database(env).select().from(users).where(eq(users.id, auth.userId)).limit(1);
  if (!rows[0]) throw notFound("user");
  const org = await database(env).select().from(organizations).where(eq(organizations.id, auth.orgId)).limit(1);
  return { ...userRecord(rows[0]), organization: org[0]?.name ?? null };
}

type KeyRow = typeof apiKeys.$inferSelect;

function keyRecord(row: KeyRow) {
  return {
    id: row.id,
    name: row.name,
    last_four: row.lastFour,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    revoked: row.revokedAt !== null,
    revokedAt: row.revokedAt,
  };
}

export async function createApiKey(env: Env, auth: AuthContext, name: string) {
  const key = `${API_KEY_PREFIX}${toHex(randomBytes(24))}`;
  const row: KeyRow = {
    id: newId(),
    userId: auth.userId,
    orgId: auth.orgId,
    name,
    keyHash: await sha256Hex(key),
    lastFour: key.slice(-4),
    createdAt: new Date().toISOString(),
    lastUsedAt: null,
    revokedAt: null,
  };
  const db = database(env);
  await db.batch([
    db.insert(apiKeys).values(row),
    auditInsert(env, auth, { action: "api_key.create", targetType: "api_key", targetId: row.id, details: { name } }),
  ]);
  return { id: row.id, name, key };
}

export async function listApiKeys(env: Env, auth: AuthContext) {
  const rows = await database(env)
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.userId, auth.userId))
    .orderBy(apiKeys.createdAt);
  return rows.map(keyRecord);
}

export async function revokeApiKey(env: Env, auth: AuthContext, keyId: string): Promise<void> {
  const db = database(env);
  const rows = await db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.id, keyId), eq(apiKeys.userId, auth.userId)))
    .limit(1);
  if (!rows[0]) throw notFound("API key");
  await db.batch([
    db
      .update(apiKeys)
      .set({ revokedAt: new Date().toISOString() })
      .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt))),
    auditInsert(env, auth, { action: "api_key.revoke", targetType: "api_key", targetId: keyId }),
  ]);
}
