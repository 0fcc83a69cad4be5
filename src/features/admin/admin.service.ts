import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { apiKeys, users } from "../../db/schema/identity";
import { AppError, badRequest, forbidden, invalidInput, notFound } from "../../lib/errors";
import { hashPassword } from "../../lib/crypto";
import { assertPasswordNotCommon } from "../../lib/password-policy";
import { newId } from "../../lib/ids";
import { isRole } from "../../middleware/auth";
import { auditInsert } from "../audit/audit.service";
import { userRecord } from "../auth/auth.service";

type UserRow = typeof users.$inferSelect;

export async function listUsers(env: Env, auth: AuthContext) {
  const rows = await database(env).select().from(users).where(eq(users.orgId, auth.orgId)).orderBy(users.createdAt);
  return rows.map(userRecord);
}

/** A user of the caller's organization; any other id is a 404. */
async function memberOf(env: Env, auth: AuthContext, userId: string): Promise<UserRow> {
  const rows = await database(env)
    .select()
    .from(users)
    .where(and(eq(users.id, userId), eq(users.orgId, auth.orgId)))
    .limit(1);
  if (!rows[0]) throw notFound("user");
  return rows[0];
}

export async function addUser(
  env: Env,
  auth: AuthContext,
  input: { email: string; password: string; username?: string; name?: string; role: "admin" | "member" | "viewer" },
) {
  await assertPasswordNotCommon(input.password);
  const now = new Date().toISOString();
  const row: UserRow = {
    id: newId(),
    orgId: auth.orgId,
    email: input.email.toLowerCase(),
    username: input.username ?? null,
    name: input.name ?? input.username ?? "",
    passwordHash: await hashPassword(input.password),
    role: input.role,
    suspended: false,
    createdAt: now,
    updatedAt: now,
  };
  const db = database(env);
  await writeUnique(
    () =>
      db.batch([
        db.insert(users).values(row),
        auditInsert(env, auth, {
          action: "user.add",
          targetType: "user",
          targetId: row.id,
          details: { email: row.email, role: row.role },
        }),
      ]),
    "a user with that email or username already exists",
  );
  return userRecord(row);
}

export async function deleteUser(env: Env, auth: AuthContext, userId: string): Promise<void> {
  const target = await memberOf(env, auth, userId);
  if (target.role === "owner")
    throw forbidden("the owner cannot be removed; transfer ownership with /admin/owner/change first");
  const db = database(env);
  // Keys go with the user, so its credentials stop working at once.
  await db.batch([
    db.delete(apiKeys).where(eq(apiKeys.userId, target.id)),
    db.delete(users).where(eq(users.id, target.id)),
    auditInsert(env, auth, {
      action: "user.delete",
      targetType: "user",
      targetId: target.id,
      details: { email: target.email },
    }),
  ]);
}

export async function changeUser(
  env: Env,
  auth: AuthContext,
  input: { user_id: string; role?: string; name?: string; suspended?: boolean },
) {
  const target = await memberOf(env, auth, input.user_id);
  if (input.role !== undefined) {
    if (!isRole(input.role))
      throw invalidInput(["body", "role"], `must be one of admin, member, viewer (got '${input.role}')`);
    if (input.role === "owner")
      throw invalidInput(["body", "role"], "the owner role moves only through /admin/owner/change");
  }
  if (target.role === "owner" && (input.role !== undefined || input.suspended)) {
    throw forbidden("the owner cannot be demoted or suspended; transfer ownership with /admin/owner/change first");
  }
  if (input.suspended && target.id === auth.userId) throw forbidden("you cannot suspend yourself");
  const changes: Partial<UserRow> = { updatedAt: new Date().toISOString() };
  if (input.role !== undefined && isRole(input.role)) changes.role = input.role;
  if (input.name !== undefined) changes.name = input.name;
  if (input.suspended !== undefined) changes.suspended = input.suspended;
  const db = database(env);
  await db.batch([
    db.update(users).set(changes).where(eq(users.id, target.id)),
    auditInsert(env, auth, {
      action: "user.change",
      targetType: "user",
      targetId: target.id,
      details: {
        from: { role: target.role, suspended: target.suspended },
        to: { role: changes.role, name: changes.name, suspended: changes.suspended },
      },
    }),
  ]);
  return userRecord({ ...target, ...changes });
}

export async function changeOwner(env: Env, auth: AuthContext, newOwnerId: string) {
  if (auth.role !== "owner") throw new AppError("forbidden", "only the owner can hand over ownership");
  if (newOwnerId === auth.userId) throw badRequest("user_id: you are already the owner");
  const target = await memberOf(env, auth, newOwnerId);
  if (target.suspended) throw badRequest("user_id: a suspended user cannot become owner");
  const now = new Date().toISOString();
  const db = database(env);
  // One batch, so the organization never has zero or two owners.
  await db.batch([
    db.update(users).set({ role: "admin", updatedAt: now }).where(eq(users.id, auth.userId)),
    db.update(users).set({ role: "owner", updatedAt: now }).where(eq(users.id, target.id)),
    auditInsert(env, auth, {
      action: "owner.change",
      targetType: "user",
      targetId: target.id,
      details: { previousOwner: auth.userId },
    }),
  ]);
  return { previous_owner: auth.userId, owner: target.id };
}
