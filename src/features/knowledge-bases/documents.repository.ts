import { eq } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments, type KbDocumentRow } from "../../db/schema/knowledge-bases";

/** How a document's indexing ended. */
export type IndexingOutcome = { status: "ready"; chunks: number } | { status: "failed"; error: string };

/** Records how a document's indexing ended (called by the Durable Object's alarm too). */
export async function markDocumentIndexed(env: Env, documentId: string, result: IndexingOutcome): Promise<void> {
  const now = new Date().toISOString();
  const set =
    result.status === "ready"
      ? { status: "ready" as const, error: null, chunkCount: result.chunks, updatedAt: now }
      : { status: "failed" as const, error: result.error, updatedAt: now };
  await database(env).update(kbDocuments).set(set).where(eq(kbDocuments.id, documentId));
}

/** A D1 statement as data, so it can travel to the index object and be written there in its batch. */
export interface StatementSpec {
  sql: string;
  params: unknown[];
}

/** A drizzle query as a StatementSpec. */
export function statementSpec(query: { toSQL(): { sql: string; params: unknown[] } }): StatementSpec {
  const { sql: text, params } = query.toSQL();
  return { sql: text, params };
}

/**
 * Writes document rows with how their indexing ended, and audit entries, in one D1 batch (the
 * index object's coalesced writes). The rows travel as one JSON parameter, since D1 binds at
 * most 100 parameters per statement; a row already there (a retry) is updated, never doubled.
 * This path bypasses drizzle's JSON column mode: `json_extract` of the row's `customMetadata`
 * object gives its JSON text, which is what the column stores.
 */
export async function recordDocuments(
  env: Env,
  documents: { row: KbDocumentRow; outcome: IndexingOutcome }[],
  audits: StatementSpec[],
): Promise<void> {
  const now = new Date().toISOString();
  const rows = documents.map(({ row, outcome }) =>
    outcome.status === "ready"
      ? { ...row, status: "ready", error: null, chunkCount: outcome.chunks, updatedAt: now }
      : { ...row, status: "failed", error: outcome.error, updatedAt: now },
  );
  const upsert = env.DB.prepare(`
    INSERT INTO kb_documents (id, kb_id, org_id, name, path, mime_type, source, size, content_hash, r2_key, custom_metadata, status, error, chunk_count, created_at, updated_at)
    SELECT json_extract(value, '$.id'), json_extract(value, '$.kbId'), json_extract(value, '$.orgId'), json_extract(value, '$.name'), json_extract(value, '$.path'),
      json_extract(value, '$.mimeType'), json_extract(value, '$.source'), json_extract(value, '$.size'), json_extract(value, '$.contentHash'), json_extract(value, '$.r2Key'),
      json_extract(value, '$.customMetadata'), json_extract(value, '$.status'), json_extract(value, '$.error'), json_extract(value, '$.chunkCount'),
      json_extract(value, '$.createdAt'), json_extract(value, '$.updatedAt')
    FROM json_each(?) WHERE true
    ON CONFLICT (id) DO UPDATE SET status = excluded.status, error = excluded.error, chunk_count = excluded.chunk_count, updated_at = excluded.updated_at`).bind(
    JSON.stringify(rows),
  );
  await env.DB.batch([upsert, ...auditStatements(env, audits)]);
}

/** `insert into "t" ("a", "b") values (?, ?)` with an optional `on conflict do nothing`, as drizzle writes it. */
const SINGLE_ROW_INSERT =
  /^insert into ("[a-z_]+") \(((?:"[a-z_]+", )*"[a-z_]+")\) values \(((?:\?, )*\?)\)( on conflict do nothing)?$/;

/**
 * The requests' audit entries as D1 statements: entries that are the same single-row insert (each
 * request's `knowledge_base.index` entry) become ONE statement reading their rows from a JSON
 * parameter, since local D1 (and D1's meter) pays per statement; anything else is sent as it is.
 * Only text, number and null parameters travel this way (`->>` gives them back as the same SQL values).
 */
function auditStatements(env: Env, audits: StatementSpec[]): D1PreparedStatement[] {
  const bySql = new Map<string, StatementSpec[]>();
  for (const a of audits) {
    const same = bySql.get(a.sql);
    if (same) same.push(a);
    else bySql.set(a.sql, [a]);
  }
  return [...bySql].flatMap(([text, specs]) => {
    const grouped = specs.length > 1 ? groupedInsert(text) : null;
    const scalar = specs.every((a) =>
      a.params.every((p) => p === null || typeof p === "string" || typeof p === "number"),
    );
    if (!grouped || !scalar) return specs.map((a) => env.DB.prepare(a.sql).bind(...a.params));
    return [env.DB.prepare(grouped).bind(JSON.stringify(specs.map((a) => a.params)))];
  });
}

/** Each audit insert's grouped form (or null when it is not a single-row insert), worked out once per SQL text. */
const groupedForms = new Map<string, string | null>();

function groupedInsert(text: string): string | null {
  let grouped = groupedForms.get(text);
  if (grouped !== undefined) return grouped;
  const shape = SINGLE_ROW_INSERT.exec(text);
  if (shape) {
    const [, table, columns, marks, ignore] = shape;
    const values = marks.split(", ").map((_, i) => `value ->> ${i}`);
    grouped = `insert into ${table} (${columns}) select ${values.join(", ")} from json_each(?) where true${ignore ?? ""}`;
  } else grouped = null;
  // Audit inserts are a handful of fixed texts; the bound keeps a stray caller from growing it.
  if (groupedForms.size < 64) groupedForms.set(text, grouped);
  return grouped;
}

/** A document row as a D1 statement (for a batch with a StatementSpec). */
export function insertDocumentRows(env: Env, rows: KbDocumentRow[]): D1PreparedStatement {
  const { sql, params } = statementSpec(database(env).insert(kbDocuments).values(rows));
  return env.DB.prepare(sql).bind(...params);
}
