import type { FilterNode } from "../metadata-filter";
import { maxFusion, reciprocalRankFusion, weightedFusion, type Scored } from "./hybrid-search";
import type { VectorMetadata } from "./vector-index";

/**
 * The retrieval half of a knowledge-base query, as the index Durable Object runs it in one call:
 * per query, keyword and vector candidates are fused; the queries' lists are fused; the score
 * cutoff, per-document limit and group-by-key apply; and only the chunks the answer shows are
 * read. These are the pure steps; the object supplies the candidate lists and the chunk reads.
 */
export type RetrievalUnit = "chunks" | "documents" | "pages";
export type SearchMode = "hybrid" | "keyword" | "vector";

export interface StoredChunk {
  id: string;
  documentId: string;
  position: number;
  text: string;
  metadata: VectorMetadata;
}

export interface RankedChunk {
  chunk: StoredChunk;
  score: number;
}

export interface RetrieveRequest {
  /** Each query's text, and its embedding (Loom's own index) or its vector matches (Vectorize). */
  queries: { text: string; vector?: number[]; vectorHits?: Scored[] }[];
  mode: SearchMode;
  fusion: "rrf" | "weighted";
  alpha: number;
  dataFusion: "rrf" | "max";
  filter?: FilterNode;
  /** Candidates each retriever returns before fusion. */
  depth: number;
  topK: number;
  unit: RetrievalUnit;
  scoreCutoff?: number;
  maxDocuments?: number;
  groupByKey?: string;
}

export interface RetrieveResult {
  /** Best first; for documents and pages, every shortlisted chunk of the top `topK` groups. */
  ranked: RankedChunk[];
  /** For `pages`: each returned page's whole text, by page key. */
  pageTexts: [string, string][];
  /** Set while documents are still indexing: what the answer could not search yet. */
  indexing?: IndexingBacklog;
}

export interface IndexingBacklog {
  documents: number;
  chunks: number;
}

/** One query's keyword and vector candidates, fused as the request's mode and fusion say. */
export function fuseHalves<K extends string | number>(
  keyword: Scored<K>[],
  vector: Scored<K>[],
  request: Pick<RetrieveRequest, "mode" | "fusion" | "alpha">,
): Scored<K>[] {
  if (request.mode === "keyword") return keyword;
  if (request.mode === "vector") return vector;
  if (request.fusion === "weighted") return weightedFusion(vector, keyword, request.alpha);
  return reciprocalRankFusion([vector, keyword]);
}

/** Several queries' lists fused by `data_fusion_method`. */
export function fuseQueries<K extends string | number>(lists: Scored<K>[][], method: "rrf" | "max"): Scored<K>[] {
  if (lists.length === 1) return lists[0];
  return method === "max" ? maxFusion(lists) : reciprocalRankFusion(lists);
}

/** Whether the result needs more than the first `topK` chunks of the fused list. */
export function needsShaping(request: Pick<RetrieveRequest, "unit" | "maxDocuments" | "groupByKey">): boolean {
  return request.unit !== "chunks" || request.maxDocuments !== undefined || request.groupByKey !== undefined;
}

/** `max_documents`: chunks from at most that many documents; `group_by_key`: one chunk per value of that key. */
export function applyLimits(
  ranked: RankedChunk[],
  request: Pick<RetrieveRequest, "maxDocuments" | "groupByKey">,
): RankedChunk[] {
  let out = ranked;
  if (request.maxDocuments !== undefined) {
    const limit = request.maxDocuments;
    const allowed = new Set<string>();
    out = out.filter(({ chunk }) => {
      if (allowed.has(chunk.documentId)) return true;
      if (allowed.size >= limit) return false;
      allowed.add(chunk.documentId);
      return true;
    });
  }
  if (request.groupByKey !== undefined) {
    const key = request.groupByKey;
    const seen = new Set<string>();
    out = out.filter(({ chunk }) => {
      const value = chunk.metadata[key];
      if (value === undefined || value === null) return true;
      const k = JSON.stringify(value);
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  }
  return out;
}

export function pageKey(chunk: StoredChunk): string {
  return `${chunk.documentId}:p${Number(chunk.metadata.page ?? 1)}`;
}

function groupKey(unit: RetrievalUnit, chunk: StoredChunk): string {
  return unit === "documents" ? chunk.documentId : unit === "pages" ? pageKey(chunk) : chunk.id;
}

/** The chunks of the first `topK` results of the unit (a chunk, a document or a page each). */
export function keepTopGroups(unit: RetrievalUnit, ranked: RankedChunk[], topK: number): RankedChunk[] {
  if (unit === "chunks") return ranked.slice(0, topK);
  const top = new Set<string>();
  for (const { chunk } of ranked) {
    if (top.size >= topK) break;
    top.add(groupKey(unit, chunk));
  }
  return ranked.filter(({ chunk }) => top.has(groupKey(unit, chunk)));
}

export interface ResultItem {
  id: string;
  document_id: string;
  score: number;
  text: string;
  metadata: Record<string, unknown>;
}

/** Ranked chunks as result items of the unit: a document or page scores as its best chunk. */
export function groupInto(unit: RetrievalUnit, ranked: RankedChunk[], pageTexts: Map<string, string>): ResultItem[] {
  if (unit === "chunks")
    return ranked.map(({ chunk, score }) => ({
      id: chunk.id,
      document_id: chunk.documentId,
      score,
      text: chunk.text,
      metadata: chunk.metadata,
    }));
  const groups = new Map<string, { score: number; chunks: StoredChunk[] }>();
  for (const { chunk, score } of ranked) {
    const key = groupKey(unit, chunk);
    const group = groups.get(key);
    if (group) group.chunks.push(chunk);
    else groups.set(key, { score, chunks: [chunk] });
  }
  return [...groups].map(([key, group]) => {
    const first = group.chunks[0];
    const { section: _section, ...metadata } = first.metadata;
    if (unit === "documents") {
      delete metadata.page;
      const text = [...group.chunks]
        .sort((a, b) => a.position - b.position)
        .map((c) => c.text)
        .join("\n\n");
      return { id: first.documentId, document_id: first.documentId, score: group.score, text, metadata };
    }
    return {
      id: key,
      document_id: first.documentId,
      score: group.score,
      text: pageTexts.get(key) ?? group.chunks.map((c) => c.text).join("\n\n"),
      metadata,
    };
  });
}
