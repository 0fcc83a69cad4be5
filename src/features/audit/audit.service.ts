import { desc, eq, and, getTableColumns, lt, sql } from "drizzle-orm";
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

const AUDIT_COLUMNS = Object.values(getTableColumns(auditLog)).map((column) => column.name);
/** auditInsert(...).onConflictDoNothing() as drizzle writes it, composed once. */
const AUDIT_INSERT_IGNORING_REPEAT = `insert into "audit_log" (${AUDIT_COLUMNS.map((name) => `"${name}"`).join(", ")}) values (${AUDIT_COLUMNS.map(() => "?").join(", ")}) on conflict do nothing`;

/**
 * auditInsert's entry as SQL text and parameters, for a write that happens elsewhere (the index
 * object's D1 batch) and may be repeated (a retry after a restart: the repeat is ignored). Built
 * without drizzle's query building, which the one-document index route paid on every request.
 */
export function auditInsertSpec(auth: AuthContext, entry: AuditEntry): { sql: string; params: (string | null)[] } {
  const row: Record<string, string | null> = {
    id: newId(),
    org_id: auth.orgId,
    actor_id: auth.userId,
    action: entry.action,
    target_type: entry.targetType,
    target_id: entry.targetId ?? null,
    details: JSON.stringify(entry.details ?? {}),
    created_at: new Date().toISOString(),
  };
  return { sql: AUDIT_INSERT_IGNORING_REPEAT, params: AUDIT_COLUMNS.map((name) => row[name]) };
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
