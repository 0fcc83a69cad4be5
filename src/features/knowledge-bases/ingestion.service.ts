import { and, eq, ne } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments, type KbDocumentRow, type KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { newId, toHex } from "../../lib/ids";
import { auditInsert } from "../audit/audit.service";
import type { ChunkInput, IngestJob, IngestResult } from "./index/knowledge-base-index";
import { chunkText } from "./chunker";
import { indexStub } from "./durable-object-vector-index";
import { markDocumentIndexed } from "./documents.repository";
import { putFile } from "../../db/files";

/** Largest file Loom indexes, after base64 decoding. */
export const MAX_FILE_BYTES = 20 * 1024 * 1024;
/** Chunks sent to the Durable Object per call, well under the RPC message cap. */
export const CHUNKS_PER_CALL = 2000;
/** A document may not produce more chunks than this. */
export const MAX_CHUNKS_PER_DOCUMENT = 200_000;

/** Where a document's chunks go: its knowledge base's index object (a stub from the Worker, the object itself in its alarm). */
export interface IngestTarget {
  ingest(job: IngestJob, options: { reset: boolean; start: boolean; total?: number }): Promise<IngestResult>;
}

export interface PreparedDocument {
  name: string;
  path: string | null;
  mimeType: string;
  source: string;
  size: number;
  bytes?: Uint8Array;
  customMetadata: Record<string, unknown>;
  /** Text pages, or the extraction failure that fails this document. */
  pages?: string[];
  error?: string;
  extraMetadata: Record<string, unknown>;
}

export async function sha256OfBytes(bytes: Uint8Array): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
}

export interface ChunkSettings {
  chunkSize: number;
  chunkOverlap: number;
}

/** What makes two documents the same for de-duplication: their text, chunking and custom metadata. */
export async function contentHashOf(doc: PreparedDocument, settings: ChunkSettings): Promise<string> {
  if (!doc.pages) return `failed:${await sha256OfBytes(doc.bytes ?? new Uint8Array())}`;
  return sha256OfBytes(
    new TextEncoder().encode(
      `${settings.chunkSize}:${settings.chunkOverlap}:${JSON.stringify(doc.customMetadata)}:${doc.pages.join("\f")}`,
    ),
  );
}

/**
 * Stores one document's row and indexes its chunks; answers its id (an identical document's id
 * when one is already indexed). `replaces` names documents whose chunks leave the index in the
 * same transaction as this one's last chunks arrive (a re-scraped page).
 */
export async function indexOne(
  env: Env,
  auth: AuthContext,
  kb: KnowledgeBaseRow,
  doc: PreparedDocument,
  settings: ChunkSettings,
  options: { target?: IngestTarget; replaces?: string[] } = {},
): Promise<string> {
  const db = database(env);
  const contentHash = await contentHashOf(doc, settings);
  if (doc.pages) {
    const same = await db
      .select({ id: kbDocuments.id })
      .from(kbDocuments)
      .where(
        and(eq(kbDocuments.kbId, kb.id), eq(kbDocuments.contentHash, contentHash), ne(kbDocuments.status, "failed")),
      )
      .limit(1);
    if (same[0]) return same[0].id;
  }

  const id = newId();
  const now = new Date().toISOString();
  const r2Key = doc.bytes ? `knowledge-bases/${kb.id}/${id}/original` : null;
  if (r2Key && doc.bytes) {
    await putFile(env, r2Key, doc.bytes, {
      contentType: doc.mimeType,
      custom: { name: doc.name.slice(0, 200), knowledgeBaseId: kb.id, documentId: id },
    });
  }
  const row: KbDocumentRow = {
    id,
    kbId: kb.id,
    orgId: kb.orgId,
    name: doc.name,
    path: doc.path,
    mimeType: doc.mimeType,
    source: doc.source,
    size: doc.size,
    contentHash,
    r2Key,
    customMetadata: doc.customMetadata,
    status: doc.error ? "failed" : "indexing",
    error: doc.error ?? null,
    chunkCount: 0,
    createdAt: now,
    updatedAt: now,
  };
  await db.batch([
    db.insert(kbDocuments).values(row),
    auditInsert(env, auth, {
      action: "knowledge_base.index",
      targetType: "knowledge_base",
      targetId: kb.id,
      details: { document_id: id, name: doc.name, source: doc.source },
    }),
  ]);
  if (doc.error || !doc.pages) return id;
  await ingestDocument(env, kb, id, doc, settings, options);
  return id;
}

/** A document's chunks with their metadata, ids `<document id>-<position>`. */
export function chunkDocument(id: string, doc: PreparedDocument, settings: ChunkSettings): ChunkInput[] {
  const chunks: ChunkInput[] = [];
  const base = {
    ...doc.customMetadata,
    ...doc.extraMetadata,
    document_id: id,
    name: doc.name,
    ...(doc.path ? { path: doc.path } : {}),
    mime_type: doc.mimeType,
    source: doc.source,
  };
  (doc.pages ?? []).forEach((page, p) => {
    for (const chunk of chunkText(page, settings)) {
      const metadata: Record<string, unknown> = {
        ...base,
        page: p + 1,
        ...(chunk.section ? { section: chunk.section } : {}),
      };
      chunks.push({
        id: `${id}-${chunks.length}`,
        documentId: id,
        position: chunks.length,
        text: chunk.text,
        metadata,
      });
    }
  });
  return chunks;
}

/**
 * Chunks made by chunkDocument under one id, given another: the same texts, positions and
 * metadata with the new document id. The index route chunks each file once, before it knows the
 * document's id (to refuse a bad file before anything is stored), and re-labels the chunks here
 * rather than chunking the text a second time (issue 14: per-document cost of small files).
 */
export function withDocumentId(chunks: ChunkInput[], id: string): ChunkInput[] {
  return chunks.map((c) => ({
    ...c,
    id: `${id}-${c.position}`,
    documentId: id,
    metadata: { ...c.metadata, document_id: id },
  }));
}

/** Why a document's chunks cannot be indexed, or null. */
export function chunkProblem(count: number): string | null {
  if (count === 0) return "no text could be extracted from this document";
  if (count > MAX_CHUNKS_PER_DOCUMENT)
    return `the document gives ${count} chunks; the limit is ${MAX_CHUNKS_PER_DOCUMENT}`;
  return null;
}

/** Chunks a stored document's pages and sends them to the index, recording how it ended (unless it continues in steps). */
export async function ingestDocument(
  env: Env,
  kb: KnowledgeBaseRow,
  id: string,
  doc: PreparedDocument,
  settings: ChunkSettings,
  options: { target?: IngestTarget; replaces?: string[] } = {},
): Promise<void> {
  if (!doc.pages) return;
  await ingestChunks(env, kb, id, chunkDocument(id, doc, settings), options);
}

/** Sends a stored document's chunks to the index in calls of CHUNKS_PER_CALL, recording how it ended (unless it continues in steps). */
export async function ingestChunks(
  env: Env,
  kb: KnowledgeBaseRow,
  id: string,
  chunks: ChunkInput[],
  options: { target?: IngestTarget; replaces?: string[] } = {},
): Promise<void> {
  const problem = chunkProblem(chunks.length);
  let result: IngestResult;
  if (problem) result = { status: "failed", error: problem };
  else {
    const target: IngestTarget = options.target ?? indexStub(env, kb.id);
    result = { status: "indexing", remaining: chunks.length };
    for (let i = 0; i < chunks.length; i += CHUNKS_PER_CALL) {
      const last = i + CHUNKS_PER_CALL >= chunks.length;
      const job: IngestJob = {
        kbId: kb.id,
        documentId: id,
        embeddingModel: kb.embeddingModel,
        chunks: chunks.slice(i, i + CHUNKS_PER_CALL),
        ...(options.replaces?.length ? { replaces: options.replaces } : {}),
      };
      result = await target.ingest(job, { reset: i === 0, start: last, total: chunks.length });
      if (result.status === "failed") break;
    }
  }
  if (result.status !== "indexing") await markDocumentIndexed(env, id, result);
}
