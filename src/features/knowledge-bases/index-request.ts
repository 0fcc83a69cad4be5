import type { AuthContext, Env } from "../../env";
import type { KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { badRequest } from "../../lib/errors";
import type { FetchFunction } from "../../lib/egress";
import { readDocumentText } from "./parsing/document-parser";
import { fetchArxiv, fetchWikipedia, fetchYoutube, type SourceDocument } from "./sources";
import type { IndexInput } from "./knowledge-bases.schemas";
import { indexUrlData } from "./web-ingestion";
import { indexFiles, prepareFiles, type PreparedFile } from "./file-ingestion";
import { contentHashOf, indexOne, type ChunkSettings, type PreparedDocument } from "./ingestion.service";
import { settingsHint, writableKnowledgeBaseWithHashes, writablePrefetched } from "./index-lookup";

// The index route's whole request: files, outside sources and web pages, each through its own
// module. Kept apart from ingestion.service, which those modules import, so nothing imports back.

export interface IngestionDeps {
  /** The network, for outside sources; tests pass recorded responses. */
  fetch?: FetchFunction;
  /** The knowledge base's rows as read with the API key (index-lookup.ts, selectKnowledgeBaseById), when they were. */
  prefetched?: unknown[];
}

function fromSource(doc: SourceDocument): PreparedDocument {
  const text = doc.pages.join("\n\n");
  return {
    name: doc.name,
    path: doc.url,
    mimeType: doc.mimeType,
    source: doc.source,
    size: new TextEncoder().encode(text).length,
    bytes: new TextEncoder().encode(text),
    customMetadata: {},
    pages: doc.pages,
    extraMetadata: doc.metadata,
  };
}

function chunkSettings(
  kb: Pick<KnowledgeBaseRow, "chunkSize" | "chunkOverlap">,
  config: IndexInput["config"],
): ChunkSettings {
  const chunkSize = config.chunk_size ?? kb.chunkSize;
  const chunkOverlap =
    config.chunk_overlap ??
    (config.chunk_size !== undefined ? Math.min(kb.chunkOverlap, chunkSize - 1) : kb.chunkOverlap);
  if (chunkOverlap >= chunkSize) throw badRequest("config.chunk_overlap: must be less than chunk_size");
  return { chunkSize, chunkOverlap };
}

/**
 * Indexes the given file and sources into a knowledge base. Answers each document's id once it
 * is searchable; a document too large for one request keeps `indexing` and is finished by the
 * knowledge base's Durable Object. Identical content already indexed is not indexed again.
 */
export async function indexIntoKnowledgeBase(
  env: Env,
  auth: AuthContext,
  kbId: string,
  input: IndexInput,
  deps: IngestionDeps,
): Promise<string[]> {
  const config = input.config;
  // With the record read alongside the API key, nothing more is read here: the index object answers
  // de-duplication (checked-ingestion.ts). Otherwise the record and the lookup share one D1 call.
  const early = deps.prefetched ? undefined : await readFilesEarly(env, auth.orgId, kbId, input);
  const { kb, known } = deps.prefetched
    ? { kb: writablePrefetched(deps.prefetched, auth, kbId), known: new Map<string, string>() }
    : await writableKnowledgeBaseWithHashes(env, auth, kbId, early?.hashes ?? []);
  if (config.enrichment_tasks && config.enrichment_tasks.length > 0)
    throw badRequest("config.enrichment_tasks: Loom does not run enrichment tasks yet; send an empty list");
  const settings = chunkSettings(kb, config);

  const readPdf = async (bytes: Uint8Array): Promise<string[]> =>
    (await readDocumentText(env, auth.orgId, "pdf", bytes)).pages;
  const refs: [string, string | undefined, (ref: string, f?: FetchFunction) => Promise<SourceDocument>][] = [
    ["encyclopedia", input.encyclopedia ?? input.wikipedia, fetchWikipedia],
    ["video", input.video ?? input.youtube, fetchYoutube],
    ["preprint", input.preprint ?? input.arxiv, (ref, f) => fetchArxiv(ref, f, readPdf)],
  ];
  if (!input.file_data && !input.url_data && refs.every(([, ref]) => !ref))
    throw badRequest("give file_data, url_data, encyclopedia, video or preprint to index");

  // Every file is read and chunked before anything is stored, so one that cannot be read refuses the request.
  // Read with the settings guessed before the record was read: the lookup that came with the record holds.
  const guessed = early && sameSettings(early.settings, settings) ? early : undefined;
  const files = guessed
    ? guessed.files
    : input.file_data
      ? await prepareFiles(env, auth.orgId, input.file_data, settings)
      : [];
  const prepared: PreparedDocument[] = [];
  for (const [, ref, fetchSource] of refs) if (ref) prepared.push(fromSource(await fetchSource(ref, deps.fetch)));

  const looked = guessed ? { hashes: guessed.hashes, known } : undefined;
  const ids: string[] = files.length ? await indexFiles(env, auth, kb, files, settings, looked) : [];
  for (const doc of prepared) ids.push(await indexOne(env, auth, kb, doc, settings));
  if (input.url_data) ids.push(...(await indexUrlData(env, auth, kb, input.url_data, settings, indexOne, deps.fetch)));
  return ids;
}

function sameSettings(a: ChunkSettings, b: ChunkSettings): boolean {
  return a.chunkSize === b.chunkSize && a.chunkOverlap === b.chunkOverlap;
}

/**
 * The request's files read and hashed with the chunk settings this isolate last saw for the
 * knowledge base (settingsHint), before its record is read, so that the de-duplication lookup
 * rides in the record's D1 round trip. Undefined when there is no guess or anything goes wrong:
 * the files are then read after the record as before, so every refusal (the knowledge base's
 * 404/403 first, then a bad setting or file) comes in the same order as without the guess.
 */
async function readFilesEarly(
  env: Env,
  orgId: string,
  kbId: string,
  input: IndexInput,
): Promise<{ settings: ChunkSettings; files: PreparedFile[]; hashes: string[] } | undefined> {
  const hint = settingsHint(orgId, kbId);
  if (!hint || !input.file_data) return undefined;
  try {
    const settings = chunkSettings(hint, input.config);
    const files = await prepareFiles(env, orgId, input.file_data, settings);
    return { settings, files, hashes: await Promise.all(files.map((f) => contentHashOf(f, settings))) };
  } catch {
    return undefined;
  }
}
