import { z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../env";
import { database } from "../db/client";
import { organizations, users } from "../db/schema/identity";
import { hasRole } from "../middleware/auth";
import { AppError, badRequest, notFound } from "./errors";
import { zBool, zId, zString } from "./schema";

/**
 * Tenancy for owned records (knowledge bases, transformations, pipelines, chatbots):
 * - a record belongs to one organization and one owner in it;
 * - everyone in the organization may read it (lists show only your own unless include_shared);
 * - its owner, or an admin or owner of the organization, may change it; viewers change nothing;
 * - a record of another organization is a 404, never a 403, so its existence does not leak.
 */
export interface OwnedRecord {
  orgId: string;
  ownerId: string;
}

export function assertVisible<T extends OwnedRecord>(record: T | undefined | null, auth: AuthContext, what: string): T {
  if (!record || record.orgId !== auth.orgId) throw notFound(what);
  return record;
}

export function assertCanCreate(auth: AuthContext): void {
  if (auth.role === "viewer") throw new AppError("forbidden", "viewers cannot create or change records");
}

export function assertWritable(record: OwnedRecord, auth: AuthContext, what: string): void {
  assertCanCreate(auth);
  if (record.ownerId !== auth.userId && !hasRole(auth, "admin"))
    throw new AppError("forbidden", `only the ${what}'s owner or an admin can change it`);
}

/** `?id=` or `?name=` (with the optional owner `username` and `org_name`), as every fetch route takes. */
export const FetchQuery = z.object({
  id: zId().optional(),
  name: zString(1, 200).optional(),
  username: zString(1, 254).optional(),
  org_name: zString(1, 200).optional(),
});
export type FetchQueryInput = z.output<typeof FetchQuery>;

export const ListQuery = z.object({
  include_shared: zBool().optional().default(false),
  verbose: zBool().optional().default(false),
});

export type FetchTarget = { id: string } | { name: string; ownerId: string };

/**
 * Turns a fetch query into what to look up: an id, or a name owned by the caller (or by the
 * named user in the caller's organization). Names never reach across organizations.
 */
export async function resolveFetchTarget(env: Env, auth: AuthContext, query: FetchQueryInput): Promise<FetchTarget> {
  if (query.id) return { id: query.id };
  if (!query.name) throw badRequest("Either id or name must be provided");
  const db = database(env);
  if (query.org_name) {
    const org = await db
      .select({ id: organizations.id })
      .from(organizations)
      .where(eq(organizations.name, query.org_name))
      .limit(1);
    if (org[0]?.id !== auth.orgId) throw notFound("record");
  }
  if (!query.username) return { name: query.name, ownerId: auth.userId };
  const owner = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.orgId, auth.orgId), eq(users.username, query.username)))
    .limit(1);
  if (!owner[0]) {
    const byEmail = await db
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.orgId, auth.orgId), eq(users.email, query.username.toLowerCase())))
      .limit(1);
    if (!byEmail[0]) throw notFound("record");
    return { name: query.name, ownerId: byEmail[0].id };
  }
  return { name: query.name, ownerId: owner[0].id };
}

/** The list envelope of CONTRACT.md: `objects` only when verbose. */
export function listEnvelope<T extends { _id: string }>(records: T[], verbose: boolean) {
  return { status: "success" as const, object_ids: records.map((r) => r._id), objects: verbose ? records : [] };
}

/** What every owned record's row holds in common. */
export interface OwnedRow extends OwnedRecord {
  id: string;
  name: string;
  description: string;
  createdAt: string;
  updatedAt: string;
}

/** The fields every owned record shows, named as CONTRACT.md names them; each kind adds its own. */
export function ownedRecordFields(row: OwnedRow) {
  return {
    _id: row.id,
    name: row.name,
    description: row.description,
    ownerId: row.ownerId,
    orgId: row.orgId,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}
