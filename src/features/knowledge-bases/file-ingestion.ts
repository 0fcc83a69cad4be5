import type { AuthContext, Env } from "../../env";
import type { KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { AppError, badRequest } from "../../lib/errors";
import { fromBase64 } from "../../lib/crypto";
import type { DocumentJob } from "./index/knowledge-base-index";
import { STEP_CHUNKS } from "./index/index-limits";
import { detectFileType, KIND_MIME } from "./extract-text";
import { readDocumentText } from "./parsing/document-parser";
import { ExtractionError } from "./parsing/parse-limits";
import { indexStub } from "./durable-object-vector-index";
import { insertDocumentRows } from "./documents.repository";
import {
  CHUNKS_PER_CALL,
  MAX_FILE_BYTES,
  chunkDocument,
  chunkProblem,
  contentHashOf,
  ingestChunks,
  type ChunkSettings,
} from "./ingestion.service";
import { planFiles, type PreparedFile } from "./file-plan";
import { indexCheckedByObject } from "./checked-ingestion";

export { ORIGINAL_IN_INDEX_MAX_BYTES, type PreparedFile } from "./file-plan";
import { MAX_FILES_PER_REQUEST, type IndexInput } from "./knowledge-bases.schemas";
import { putFile } from "../../db/files";
import { knownHashes } from "./index-lookup";

function decodeRawBytes(raw: string, field: string): Uint8Array {
  const compact = raw.replace(/\s+/g, "").replace(/^data:[^,]*;base64,/, "");
  if (compact.length > Math.ceil((MAX_FILE_BYTES * 4) / 3) + 4)
    throw new AppError("payload_too_large", `${field}: the file exceeds ${MAX_FILE_BYTES} bytes`);
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(compact)) throw badRequest(`${field}: not valid base64`);
  try {
    return fromBase64(compact.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    throw badRequest(`${field}: not valid base64`);
  }
}

type FileDataEntry = Exclude<NonNullable<IndexInput["file_data"]>, unknown[]>;
type FilePartEntry = Exclude<NonNullable<FileDataEntry["file"]>, unknown[]>;

/** `file_data` in its three forms (one file, a list, several multipart parts) as one list, each with the field that names it in errors. */
function fileEntries(
  fileData: NonNullable<IndexInput["file_data"]>,
): { part: FilePartEntry; entry: FileDataEntry; field: string }[] {
  const entries = Array.isArray(fileData)
    ? fileData.map((entry, i) => ({ entry, field: `file_data[${i}]` }))
    : [{ entry: fileData, field: "file_data" }];
  const missing = entries.find(({ entry }) => entry.file === undefined);
  if (missing) throw badRequest(`${missing.field}.file: Invalid input: expected object, received undefined`);
  return entries.flatMap(({ entry, field }) =>
    entry.file === undefined
      ? []
      : Array.isArray(entry.file)
        ? entry.file.map((part, j) => ({ part, entry, field: `${field}.file[${j}]` }))
        : [{ part: entry.file, entry, field: `${field}.file` }],
  );
}

/**
 * Reads and chunks every file of the request. A file that cannot be read (corrupt, past a parsing
 * limit, no text) refuses the whole request with a 400 naming it, before anything is stored: the
 * caller learns at once and retries without the file, and no half-indexed batch is left behind.
 */
export async function prepareFiles(
  env: Env,
  orgId: string,
  fileData: NonNullable<IndexInput["file_data"]>,
  settings: ChunkSettings,
): Promise<PreparedFile[]> {
  const entries = fileEntries(fileData);
  if (entries.length > MAX_FILES_PER_REQUEST)
    throw badRequest(`file_data: at most ${MAX_FILES_PER_REQUEST} files per request; this one has ${entries.length}`);
  const prepared: PreparedFile[] = [];
  for (const { part, entry, field } of entries) {
    const bytes = decodeRawBytes(part.raw_bytes, `${field}.raw_bytes`);
    if (bytes.length === 0) throw badRequest(`${field}.raw_bytes: the file is empty`);
    if (bytes.length > MAX_FILE_BYTES)
      throw new AppError("payload_too_large", `${field}.raw_bytes: the file exceeds ${MAX_FILE_BYTES} bytes`);
    // The SDK names a single file beside the part (`file_data.metadata`); what it says beats what the part implied.
    const meta = { ...part.metadata, ...(Array.isArray(entry.file) ? {} : entry.metadata) };
    const kind = detectFileType(meta.mime_type, meta.name ?? meta.path, bytes);
    const name = meta.name ?? meta.path?.split("/").pop() ?? "document";
    const refuse = (reason: string) =>
      badRequest(
        `${field} ('${name.slice(0, 200)}') cannot be indexed: ${reason}${entries.length > 1 ? "; no file of this request was indexed" : ""}`,
      );
    let pages: string[];
    try {
      pages = (await readDocumentText(env, orgId, kind, bytes)).pages;
    } catch (error) {
      if (error instanceof ExtractionError) throw refuse(error.message);
      throw error;
    }
    const doc = {
      name,
      path: meta.path ?? null,
      mimeType: KIND_MIME[kind],
      source: "file",
      size: bytes.length,
      bytes,
      customMetadata: entry.custom_metadata ?? {},
      extraMetadata: {},
      pages,
    };
    const chunks = chunkDocument("x", doc, settings);
    const problem = chunkProblem(chunks.length);
    if (problem) throw refuse(problem);
    prepared.push({
      ...doc,
      chunkCount: chunks.length,
      chunks: chunks.length <= STEP_CHUNKS ? chunks : undefined,
      settings,
    });
  }
  return prepared;
}

/**
 * Stores and indexes the request's files; answers one id per file, in order (an identical
 * document's id when one is indexed already, in this request too). Documents small enough for
 * one step go to the index object in one call, with their originals when those are small too,
 * where they are written together with other requests' documents and their rows recorded in D1
 * by the object. Larger ones continue in steps as before; other originals go to R2 in parallel.
 */
export async function indexFiles(
  env: Env,
  auth: AuthContext,
  kb: KnowledgeBaseRow,
  files: PreparedFile[],
  settings: ChunkSettings,
  /** The files' content hashes and the documents already holding them, when the caller looked them up already. */
  looked?: { hashes: string[]; known: Map<string, string> },
): Promise<string[]> {
  const hashes = looked?.hashes ?? (await Promise.all(files.map((f) => contentHashOf(f, settings))));
  if (!looked) {
    const ids = await indexCheckedByObject(env, auth, kb, files, settings, hashes);
    if (ids) return ids;
  }
  const known = looked ? looked.known : await knownHashes(env, kb.id, hashes);
  const { ids, small, large, toR2, audit } = planFiles(auth, kb, files, settings, hashes, known);
  if (!audit) return ids;
  const originals = Promise.all(
    toR2.map(({ file, row }) =>
      putFile(env, row.r2Key ?? "", file.bytes ?? new Uint8Array(), {
        contentType: file.mimeType,
        custom: { name: file.name.slice(0, 200), knowledgeBaseId: kb.id, documentId: row.id },
      }),
    ),
  );
  // Small documents: the index object writes their rows (and the audit entry) once they are
  // searchable, in one D1 batch shared with other requests'. One call per CHUNKS_PER_CALL chunks
  // keeps each call well under the RPC message cap.
  const stub = indexStub(env, kb.id);
  const calls: Promise<unknown>[] = [originals];
  for (let i = 0, first = true; i < small.length; first = false) {
    const group: DocumentJob[] = [];
    let size = 0;
    while (i < small.length && (group.length === 0 || size + small[i].chunks.length <= CHUNKS_PER_CALL)) {
      size += small[i].chunks.length;
      group.push(small[i++]);
    }
    calls.push(stub.ingestDocuments(group, first ? audit : undefined));
  }
  await Promise.all(calls);
  // Large documents: their row first (its progress is visible while the alarm continues them).
  for (const [n, { row, chunks }] of large.entries()) {
    const statements = [
      insertDocumentRows(env, [row]),
      ...(small.length === 0 && n === 0 ? [env.DB.prepare(audit.sql).bind(...audit.params)] : []),
    ];
    await env.DB.batch(statements);
    await ingestChunks(env, kb, row.id, chunks);
  }
  return ids;
}
