import type { AuthContext } from "../../env";
import type { KbDocumentRow, KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { newId } from "../../lib/ids";
import { auditInsertSpec } from "../audit/audit.service";
import type { ChunkInput, DocumentJob } from "./index/knowledge-base-index";
import { STEP_CHUNKS } from "./index/index-limits";
import type { StatementSpec } from "./documents.repository";
import { chunkDocument, withDocumentId, type ChunkSettings, type PreparedDocument } from "./ingestion.service";

/**
 * A small document's original up to this size is kept by the index object beside its chunks (in
 * the batch's transaction) instead of as an R2 object of its own: an R2 put per file was the
 * largest cost of many small files (issue 14). Larger originals, and every document indexed in
 * steps, still go to R2 under `knowledge-bases/<kb>/<document>/original`.
 */
export const ORIGINAL_IN_INDEX_MAX_BYTES = 16 * 1024;

/** A file read and chunked, not stored yet. */
export interface PreparedFile extends PreparedDocument {
  pages: string[];
  /** How many chunks it gives (checked before anything is stored). */
  chunkCount: number;
  /**
   * A small file's chunks under a placeholder id (see withDocumentId), kept so it is chunked once.
   * A file indexed in steps is chunked again instead: holding its chunks from here would double
   * the request's largest allocation.
   */
  chunks?: ChunkInput[];
  /** The settings they were made with: other settings chunk the file again. */
  settings: ChunkSettings;
}

/** What the request stores: one id per file, and the new documents as the index object or R2 take them. */
export interface FilePlan {
  ids: string[];
  /** The request's audit entry; undefined when every file is a document held already. */
  audit?: StatementSpec;
  small: DocumentJob[];
  large: { row: KbDocumentRow; chunks: ChunkInput[] }[];
  toR2: { file: PreparedFile; row: KbDocumentRow }[];
}

/**
 * Ids for the request's files (`known`'s id for content held already, one new id per other
 * content, a repeat in the request keeping the first's) and the new documents' rows and jobs.
 * Pure: `known` is not changed, so a plan sent back by the index object can be made again.
 */
export function planFiles(
  auth: AuthContext,
  kb: KnowledgeBaseRow,
  files: PreparedFile[],
  settings: ChunkSettings,
  hashes: string[],
  knownBefore: ReadonlyMap<string, string>,
): FilePlan {
  const known = new Map(knownBefore);
  const ids: string[] = [];
  const fresh: { file: PreparedFile; row: KbDocumentRow }[] = [];
  const now = new Date().toISOString();
  files.forEach((file, i) => {
    const id = known.get(hashes[i]) ?? newId();
    ids.push(id);
    if (known.has(hashes[i])) return;
    known.set(hashes[i], id);
    const row: KbDocumentRow = {
      id,
      kbId: kb.id,
      orgId: kb.orgId,
      name: file.name,
      path: file.path,
      mimeType: file.mimeType,
      source: file.source,
      size: file.size,
      contentHash: hashes[i],
      r2Key: `knowledge-bases/${kb.id}/${id}/original`,
      customMetadata: file.customMetadata,
      status: "indexing",
      error: null,
      chunkCount: 0,
      createdAt: now,
      updatedAt: now,
    };
    fresh.push({ file, row });
  });
  const plan: FilePlan = { ids, small: [], large: [], toR2: [] };
  if (fresh.length === 0) return plan;
  // The index object may write it again after a restart: the repeat is ignored.
  plan.audit = auditInsertSpec(auth, {
    action: "knowledge_base.index",
    targetType: "knowledge_base",
    targetId: kb.id,
    details:
      fresh.length === 1
        ? { document_id: fresh[0].row.id, name: fresh[0].row.name, source: "file" }
        : {
            document_ids: fresh.map((f) => f.row.id),
            names: fresh.slice(0, 20).map((f) => f.row.name),
            source: "file",
          },
  });
  for (const { file, row } of fresh) {
    const chunks =
      file.chunks &&
      file.settings.chunkSize === settings.chunkSize &&
      file.settings.chunkOverlap === settings.chunkOverlap
        ? withDocumentId(file.chunks, row.id)
        : chunkDocument(row.id, file, settings);
    const job = { kbId: kb.id, documentId: row.id, embeddingModel: kb.embeddingModel, chunks };
    const besideChunks = file.bytes !== undefined && file.bytes.length <= ORIGINAL_IN_INDEX_MAX_BYTES;
    if (chunks.length > STEP_CHUNKS) plan.large.push({ row, chunks });
    else if (besideChunks) plan.small.push({ ...job, row: { ...row, r2Key: null }, original: file.bytes });
    else plan.small.push({ ...job, row });
    if (chunks.length > STEP_CHUNKS || !besideChunks) plan.toR2.push({ file, row });
  }
  return plan;
}
