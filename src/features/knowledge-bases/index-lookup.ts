import { and, eq, getTableColumns, inArray, ne } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments, knowledgeBases, type KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { assertVisible, assertWritable } from "../../lib/ownership";
import type { ChunkSettings } from "./ingestion.service";
import type { Prefetch } from "../../middleware/auth";

/** Content hashes looked up per D1 statement (D1 binds at most 100 parameters). */
export const HASHES_PER_LOOKUP = 90;
/** Knowledge bases whose chunk settings this isolate remembers (a hint only: see settingsHint). */
const HINTS_KEPT = 1_000;

const hints = new Map<string, ChunkSettings>();

/**
 * The chunk settings a knowledge base had when this isolate last read it, or undefined. Only a
 * guess that lets the index route hash a request's files before it reads the knowledge base, so
 * the record and the de-duplication lookup go to D1 in one round trip (issue 14); the record read
 * in that same round trip decides, and a wrong guess costs the lookup again. Nothing about access
 * is remembered: every request reads its knowledge base, with its organization, as before.
 */
export function settingsHint(orgId: string, kbId: string): ChunkSettings | undefined {
  return hints.get(`${orgId}/${kbId}`);
}

function remember(kb: KnowledgeBaseRow): void {
  // Keyed by organization too, so a caller from another one never has files read before the 404.
  const key = `${kb.orgId}/${kb.id}`;
  hints.delete(key);
  hints.set(key, { chunkSize: kb.chunkSize, chunkOverlap: kb.chunkOverlap });
  if (hints.size > HINTS_KEPT) hints.delete(hints.keys().next().value ?? "");
}

function lookupStatements(env: Env, kbId: string, hashes: string[]) {
  const db = database(env);
  const unique = [...new Set(hashes)];
  const statements = [];
  for (let i = 0; i < unique.length; i += HASHES_PER_LOOKUP)
    statements.push(
      db
        .select({ id: kbDocuments.id, hash: kbDocuments.contentHash })
        .from(kbDocuments)
        .where(
          and(
            eq(kbDocuments.kbId, kbId),
            inArray(kbDocuments.contentHash, unique.slice(i, i + HASHES_PER_LOOKUP)),
            ne(kbDocuments.status, "failed"),
          ),
        ),
    );
  return statements;
}

function byHash(rows: { id: string; hash: string }[][]): Map<string, string> {
  const known = new Map<string, string>();
  for (const r of rows.flat()) if (!known.has(r.hash)) known.set(r.hash, r.id);
  return known;
}

/** Ids of documents already indexed with these content hashes, by hash. */
export async function knownHashes(env: Env, kbId: string, hashes: string[]): Promise<Map<string, string>> {
  const rows: { id: string; hash: string }[][] = [];
  for (const statement of lookupStatements(env, kbId, hashes)) rows.push(await statement);
  return byHash(rows);
}

/**
 * The knowledge base the caller may write to (404 for another organization's, 403 for a viewer or
 * a member who does not own it, exactly as writableKnowledgeBase) and, in the same D1 batch (one
 * call, where the record and the lookup were two one after the other), the documents it already
 * holds with these content hashes. The lookup's rows are used only once the record says the
 * caller may write to the base.
 */
export async function writableKnowledgeBaseWithHashes(
  env: Env,
  auth: AuthContext,
  kbId: string,
  hashes: string[],
): Promise<{ kb: KnowledgeBaseRow; known: Map<string, string> }> {
  const db = database(env);
  const record = db
    .select()
    .from(knowledgeBases)
    .where(and(eq(knowledgeBases.id, kbId), eq(knowledgeBases.orgId, auth.orgId)))
    .limit(1);
  const [rows, ...lookups] = await db.batch([record, ...lookupStatements(env, kbId, hashes)]);
  const kb = assertVisible((rows as KnowledgeBaseRow[])[0], auth, "knowledge base");
  assertWritable(kb, auth, "knowledge base");
  remember(kb);
  return { kb, known: byHash(lookups as { id: string; hash: string }[][]) };
}

/**
 * The index and query routes' knowledge base, read in the API key's D1 round trip (route.ts
 * `prefetch`): with de-duplication answered by the index object (checked-ingestion.ts), a request
 * for small files then makes no D1 call of its own before the object's shared write, and a query
 * one D1 call instead of two. Read by id alone, since the caller's organization is not known yet;
 * visiblePrefetched / writablePrefetched check it.
 */
/** The knowledge base's columns by property, and its SELECT by id, written once from the schema (no query building per request). */
const KB_COLUMNS = Object.entries(getTableColumns(knowledgeBases));
export const KNOWLEDGE_BASE_BY_ID = `SELECT ${KB_COLUMNS.map(([, column]) => `"${column.name}"`).join(", ")} FROM knowledge_bases WHERE id = ? LIMIT 1`;

/** A row of KNOWLEDGE_BASE_BY_ID (or its columns in a joined row) as drizzle maps it: by each column's own driver mapping (booleans, JSON). */
export function knowledgeBaseFromColumns(columns: Record<string, unknown>): KnowledgeBaseRow | undefined {
  if (columns.id === null || columns.id === undefined) return undefined;
  const row: Record<string, unknown> = {};
  for (const [key, column] of KB_COLUMNS) {
    const value = columns[column.name];
    row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row as KnowledgeBaseRow;
}

/** The index and query routes' prefetch (route.ts `prefetch`, built there from these two): the base named by the path. */
export const selectKnowledgeBaseById: Prefetch["select"] = (c) => ({
  sql: KNOWLEDGE_BASE_BY_ID,
  params: [c.req.param("id") ?? ""],
});

export function prefetchedKnowledgeBases(joined: Record<string, unknown>): KnowledgeBaseRow[] {
  const kb = knowledgeBaseFromColumns(joined);
  return kb ? [kb] : [];
}

/** The prefetched knowledge base, with exactly queryableKnowledgeBase's refusal (404 for another organization's). */
export function visiblePrefetched(rows: unknown[], auth: AuthContext, kbId: string): KnowledgeBaseRow {
  const row = (rows as KnowledgeBaseRow[]).find((r) => r.id === kbId && r.orgId === auth.orgId);
  return assertVisible(row, auth, "knowledge base");
}

/** The prefetched knowledge base, with exactly writableKnowledgeBase's refusals (404 for another organization's, 403). */
export function writablePrefetched(rows: unknown[], auth: AuthContext, kbId: string): KnowledgeBaseRow {
  const kb = visiblePrefetched(rows, auth, kbId);
  assertWritable(kb, auth, "knowledge base");
  remember(kb);
  return kb;
}
