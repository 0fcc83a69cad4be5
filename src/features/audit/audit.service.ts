import { desc, eq, and, lt, sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { auditLog } from "../../db/schema/identity";
import { newId } from "../../lib/ids";

export interface AuditEntry {
  action: string;
  targetType: string;
  targetId?: string | null;
  /** Must never contain a secret. */
  details?: Record<string, unknown>;
}

/** The insert for one audit entry, for callers that batch it with the change it records. */
export function auditInsert(env: Env, auth: AuthContext, entry: AuditEntry) {
  return database(env)
    .insert(auditLog)
    .values({
      id: newId(),
      orgId: auth.orgId,
      actorId: auth.userId,
      action: entry.action,
      targetType: entry.targetType,
      targetId: entry.targetId ?? null,
      details: entry.details ?? {},
      createdAt: new Date().toISOString(),
    });
}

export async function recordAudit(env: Env, auth: AuthContext, entry: AuditEntry): Promise<void> {
  await auditInsert(env, auth, entry);
}

export async function listAudit(env: Env, auth: AuthContext, limit: number, before?: string) {
  const where = before
    ? and(eq(auditLog.orgId, auth.orgId), lt(auditLog.createdAt, before))
    : eq(auditLog.orgId, auth.orgId);
  const rows = await database(env)
    .select()
    .from(auditLog)
    .where(where)
    .orderBy(desc(auditLog.createdAt), desc(sql`rowid`))
    .limit(limit);
  return rows.map((row) => ({
    _id: row.id,
    orgId: row.orgId,
    actorId: row.actorId,
    action: row.action,
    targetType: row.targetType,
    targetId: row.targetId,
    details: row.details,
    createdAt: row.createdAt,
  }));
}
