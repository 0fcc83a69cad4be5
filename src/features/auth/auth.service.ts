import { and, eq, isNull, or } from "drizzle-orm";
import { sign } from "hono/jwt";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { apiKeys, organizations, users } from "../../db/schema/identity";
import { AppError, conflict, forbidden, notFound } from "../../lib/errors";
import { hashPassword, randomBytes, sha256Hex, verifyPassword } from "../../lib/crypto";
import { newId, toHex } from "../../lib/ids";
import { accessTokenTtlSeconds, requireSecret, signupAllowed } from "../../lib/config";
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

export async function issueAccessToken(env: Env, user: Pick<UserRow, "id" | "orgId">): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return sign({ sub: user.id, org: user.orgId, iat: now, exp: now + accessTokenTtlSeconds(env) }, requireSecret(env, "JWT_SECRET"), "HS256");
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
  const db = database(env);
  const email = input.email.toLowerCase();
  const orgName = input.organization?.trim() || `${input.username ?? email.split("@")[0]}'s organization`;
  const taken = await db
    .select({ id: users.id })
    .from(users)
    .where(input.username ? or(eq(users.email, email), eq(users.username, input.username)) : eq(users.email, email))
    .limit(1);
  if (taken.length) throw conflict("a user with that email or username already exists");
  const existingOrg = await db.select({ id: organizations.id }).from(organizations).where(eq(organizations.name, orgName)).limit(1);
  // Joining an existing organization needs one of its admins (POST /admin/users/add), never self-service.
  if (existingOrg.length) throw conflict(`organization '${orgName}' already exists; ask one of its administrators to add you`);

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
        auditInsert(env, auth, { action: "organization.create", targetType: "organization", targetId: org.id, details: { name: orgName } }),
      ]),
    "a user or organization with that name already exists",
  );
  return { access_token: await issueAccessToken(env, user), token_type: "bearer" as const, user: { ...userRecord(user), organization: orgName } };
}

export async function login(env: Env, username: string, password: string) {
  const login = username.trim();
  const rows = await database(env)
    .select()
    .from(users)
    .where(or(eq(users.email, login.toLowerCase()), eq(users.username, login)))
    .limit(1);
  const user = rows[0];
  // Hash even when the user is unknown, so timing does not reveal which accounts exist.
  const ok = user ? await verifyPassword(password, user.passwordHash) : (await hashPassword(password), false);
  if (!user || !ok) throw new AppError("unauthorized", "Incorrect username or password");
  if (user.suspended) throw new AppError("forbidden", "this account is suspended");
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
  return { id: row.id, name: row.name, last_four: row.lastFour, createdAt: row.createdAt, lastUsedAt: row.lastUsedAt, revoked: row.revokedAt !== null, revokedAt: row.revokedAt };
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
  await db.batch([db.insert(apiKeys).values(row), auditInsert(env, auth, { action: "api_key.create", targetType: "api_key", targetId: row.id, details: { name } })]);
  return { id: row.id, name, key };
}

export async function listApiKeys(env: Env, auth: AuthContext) {
  const rows = await database(env).select().from(apiKeys).where(eq(apiKeys.userId, auth.userId)).orderBy(apiKeys.createdAt);
  return rows.map(keyRecord);
}

export async function revokeApiKey(env: Env, auth: AuthContext, keyId: string): Promise<void> {
  const db = database(env);
  const rows = await db.select().from(apiKeys).where(and(eq(apiKeys.id, keyId), eq(apiKeys.userId, auth.userId))).limit(1);
  if (!rows[0]) throw notFound("API key");
  await db.batch([
    db.update(apiKeys).set({ revokedAt: new Date().toISOString() }).where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt))),
    auditInsert(env, auth, { action: "api_key.revoke", targetType: "api_key", targetId: keyId }),
  ]);
}
