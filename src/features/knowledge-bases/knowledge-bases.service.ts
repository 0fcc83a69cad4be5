import { and, count, desc, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, readNearest } from "../../db/client";
import {
  kbDocuments,
  knowledgeBases,
  type KbDocumentRow,
  type KnowledgeBaseRow,
} from "../../db/schema/knowledge-bases";
import { conflict, badRequest, notFound } from "../../lib/errors";
import { newId, isId } from "../../lib/ids";
import {
  assertCanCreate,
  assertVisible,
  assertWritable,
  resolveFetchTarget,
  type FetchQueryInput,
  ownedRecordFields,
} from "../../lib/ownership";
import { auditInsert } from "../audit/audit.service";
import { DEFAULT_EMBEDDING_MODEL, resolveEmbedder } from "./embedders";
import { indexStub } from "./durable-object-vector-index";
import { vectorIndexFor } from "./vector-backend";
import type { DocumentsListFilters, KnowledgeBaseCreateInput } from "./knowledge-bases.schemas";
import { deleteFiles, listFileKeys } from "../../db/files";

export function knowledgeBaseRecord(row: KnowledgeBaseRow) {
  return {
    ...ownedRecordFields(row),
    chunkSize: row.chunkSize,
    chunkOverlap: row.chunkOverlap,
    fileProcessingImplementation: row.fileProcessingImplementation,
    analyzeDocuments: row.analyzeDocuments,
    isHybrid: row.isHybrid,
    embeddingModel: row.embeddingModel,
    embeddingDimensions: row.embeddingDimensions,
  };
}

export function documentRecord(row: KbDocumentRow) {
  return {
    _id: row.id,
    knowledgeBaseId: row.kbId,
    name: row.name,
    path: row.path,
    mimeType: row.mimeType,
    source: row.source,
    size: row.size,
    status: row.status,
    error: row.error,
    chunkCount: row.chunkCount,
    customMetadata: row.customMetadata,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

export async function createKnowledgeBase(
  env: Env,
  auth: AuthContext,
  input: KnowledgeBaseCreateInput,
): Promise<string> {
  assertCanCreate(auth);
  const model = input.embedding_model ?? DEFAULT_EMBEDDING_MODEL;
  const embedder = await resolveEmbedder(env, model);
  const db = database(env);
  const now = new Date().toISOString();
  const row: KnowledgeBaseRow = {
    id: newId(),
    orgId: auth.orgId,
    ownerId: auth.userId,
    name: input.name,
    description: input.description,
    chunkSize: input.chunk_size,
    chunkOverlap: input.chunk_overlap,
    fileProcessingImplementation: input.file_processing_implementation,
    analyzeDocuments: input.analyze_documents,
    isHybrid: input.is_hybrid,
    embeddingModel: embedder.model,
    embeddingDimensions: embedder.dimensions,
    createdAt: now,
    updatedAt: now,
  };
  try {
    await db.batch([
      db.insert(knowledgeBases).values(row),
      auditInsert(env, auth, {
        action: "knowledge_base.create",
        targetType: "knowledge_base",
        targetId: row.id,
        details: { name: row.name },
      }),
    ]);
  } catch (error) {
    if (String(error).includes("UNIQUE")) throw conflict(`you already have a knowledge base named '${input.name}'`);
    throw error;
  }
  return row.id;
}

/** A knowledge base the caller may see, or 404. */
export async function visibleKnowledgeBase(env: Env, auth: AuthContext, id: string): Promise<KnowledgeBaseRow> {
  const rows = await database(env)
    .select()
    .from(knowledgeBases)
    .where(and(eq(knowledgeBases.id, id), eq(knowledgeBases.orgId, auth.orgId)))
    .limit(1);
  return assertVisible(rows[0], auth, "knowledge base");
}

/**
 * The same for a query, which does not need the newest write: read from the nearest D1 replica
 * (readNearest; a knowledge base not found there is looked up on the primary).
 */
export async function queryableKnowledgeBase(env: Env, auth: AuthContext, id: string): Promise<KnowledgeBaseRow> {
  const rows = await readNearest(env, (db) =>
    db
      .select()
      .from(knowledgeBases)
      .where(and(eq(knowledgeBases.id, id), eq(knowledgeBases.orgId, auth.orgId)))
      .limit(1),
  );
  return assertVisible(rows[0], auth, "knowledge base");
}

export async function writableKnowledgeBase(env: Env, auth: AuthContext, id: string): Promise<KnowledgeBaseRow> {
  const row = await visibleKnowledgeBase(env, auth, id);
  assertWritable(row, auth, "knowledge base");
  return row;
}

export async function fetchKnowledgeBase(env: Env, auth: AuthContext, query: FetchQueryInput) {
  const target = await resolveFetchTarget(env, auth, query);
  const db = database(env);
  const rows =
    "id" in target
      ? await db
          .select()
          .from(knowledgeBases)
          .where(and(eq(knowledgeBases.id, target.id), eq(knowledgeBases.orgId, auth.orgId)))
          .limit(1)
      : await db
          .select()
          .from(knowledgeBases)
          .where(
            and(
              eq(knowledgeBases.orgId, auth.orgId),
              eq(knowledgeBases.ownerId, target.ownerId),
              eq(knowledgeBases.name, target.name),
            ),
          )
          .limit(1);
  const kb = assertVisible(rows[0], auth, "knowledge base");
  const [byState, shards] = await Promise.all([documentsByState(env, kb.id), indexStub(env, kb.id).shardCount()]);
  return { ...knowledgeBaseRecord(kb), documentsByState: byState, shards };
}

/** How many of a knowledge base's documents are indexing, ready and failed. */
async function documentsByState(env: Env, kbId: string): Promise<Record<KbDocumentRow["status"], number>> {
  const rows = await database(env)
    .select({ status: kbDocuments.status, n: count() })
    .from(kbDocuments)
    .where(eq(kbDocuments.kbId, kbId))
    .groupBy(kbDocuments.status);
  const counts = { indexing: 0, ready: 0, failed: 0 };
  for (const r of rows) counts[r.status] = r.n;
  return counts;
}

export async function listKnowledgeBases(env: Env, auth: AuthContext, includeShared: boolean) {
  const db = database(env);
  const where = includeShared
    ? eq(knowledgeBases.orgId, auth.orgId)
    : and(eq(knowledgeBases.orgId, auth.orgId), eq(knowledgeBases.ownerId, auth.userId));
  const rows = await db
    .select()
    .from(knowledgeBases)
    .where(where)
    .orderBy(desc(knowledgeBases.createdAt), desc(knowledgeBases.id))
    .limit(1000);
  return rows.map(knowledgeBaseRecord);
}

/** Removes the knowledge base with its documents, chunks, vectors and stored files. */
export async function deleteKnowledgeBase(env: Env, auth: AuthContext, id: string): Promise<void> {
  const kb = await writableKnowledgeBase(env, auth, id);
  const db = database(env);
  const docs = await db
    .select({ id: kbDocuments.id, r2Key: kbDocuments.r2Key })
    .from(kbDocuments)
    .where(eq(kbDocuments.kbId, kb.id));
  const stub = indexStub(env, kb.id);
  const vectorize = vectorIndexFor(env, kb.id);
  if (vectorize) {
    const { chunks } = await stub.deleteDocuments(docs.map((d) => d.id));
    if (chunks.length) await vectorize.deleteByIds(chunks);
  }
  await stub.destroy();
  // Every original under the knowledge base's prefix too, so a file whose row was never written goes as well.
  await deleteFiles(env, [...docs.map((d) => d.r2Key), ...(await listFileKeys(env, `knowledge-bases/${kb.id}/`))]);
  await db.batch([
    db.delete(kbDocuments).where(eq(kbDocuments.kbId, kb.id)),
    db.delete(knowledgeBases).where(eq(knowledgeBases.id, kb.id)),
    auditInsert(env, auth, {
      action: "knowledge_base.delete",
      targetType: "knowledge_base",
      targetId: kb.id,
      details: { name: kb.name, documents: docs.length },
    }),
  ]);
}

/**
 * A knowledge base's documents, newest first, narrowed by the given filters. A filter always
 * applies: Loom keeps no folders and syncs no integrations, so a folder or integration filter
 * matches nothing rather than being ignored.
 */
export async function listDocuments(env: Env, auth: AuthContext, kbId: string, filters: DocumentsListFilters = {}) {
  const kb = await visibleKnowledgeBase(env, auth, kbId);
  if (filters.folder_id !== undefined || filters.integration_id !== undefined) return { documents: [] };
  const where =
    filters.title === undefined
      ? eq(kbDocuments.kbId, kb.id)
      : and(eq(kbDocuments.kbId, kb.id), eq(kbDocuments.name, filters.title));
  const rows = await database(env)
    .select()
    .from(kbDocuments)
    .where(where)
    .orderBy(desc(kbDocuments.createdAt), desc(kbDocuments.id))
    .limit(5000);
  // Documents still indexing show how far they are: chunks indexed and in all, from the index object.
  // A shard that cannot answer leaves its documents without progress and is named (missing_shards).
  const indexing = rows.filter((r) => r.status === "indexing").map((r) => r.id);
  const asked = indexing.length ? await indexStub(env, kb.id).progress(indexing.slice(0, 500)) : undefined;
  const progress = new Map((asked?.progress ?? []).map((p) => [p.documentId, p]));
  const documents = rows.map((row) => {
    const p = progress.get(row.id);
    return p
      ? { ...documentRecord(row), progress: { chunksIndexed: p.chunksIndexed, chunksTotal: p.chunksTotal } }
      : documentRecord(row);
  });
  const missing = asked?.missing ?? [];
  return missing.length ? { documents, partial: true as const, missing_shards: missing } : { documents };
}

export function parseDocumentIds(text: string): string[] {
  const ids = [
    ...new Set(
      text
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  if (ids.length === 0) throw badRequest("document_ids: give at least one document id");
  if (ids.length > 100) throw badRequest("document_ids: at most 100 ids at once");
  const bad = ids.find((id) => !isId(id));
  if (bad) throw badRequest(`document_ids: '${bad.slice(0, 40)}' is not a 24-character hex id`);
  return ids;
}

/** Removes documents with their chunks, vectors and stored files. Unknown ids are a 404. */
export async function deleteDocuments(
  env: Env,
  auth: AuthContext,
  kbId: string,
  documentIds: string[],
): Promise<string[]> {
  const kb = await writableKnowledgeBase(env, auth, kbId);
  const db = database(env);
  const rows = await db
    .select()
    .from(kbDocuments)
    .where(and(eq(kbDocuments.kbId, kb.id), inArray(kbDocuments.id, documentIds)));
  const missing = documentIds.filter((id) => !rows.some((r) => r.id === id));
  if (missing.length) throw notFound(`document ${missing[0]}`);
  const { chunks } = await indexStub(env, kb.id).deleteDocuments(documentIds);
  const vectorize = vectorIndexFor(env, kb.id);
  if (vectorize && chunks.length) await vectorize.deleteByIds(chunks);
  await deleteFiles(
    env,
    rows.map((r) => r.r2Key),
  );
  await db.batch([
    db.delete(kbDocuments).where(and(eq(kbDocuments.kbId, kb.id), inArray(kbDocuments.id, documentIds))),
    auditInsert(env, auth, {
      action: "knowledge_base.documents.delete",
      targetType: "knowledge_base",
      targetId: kb.id,
      details: { document_ids: documentIds },
    }),
  ]);
  return documentIds;
}
