import type { FilterNode } from "../metadata-filter";
import { feedbackWords } from "./keyword-feedback";
import { leadingTitle } from "./title-boost";
import type { Scored } from "./hybrid-search";
import type { KeywordScorer, KeywordStats } from "./keyword-scorer";
import type { VectorStore } from "./vector-store";
import { toChunk, type ChunkRetriever } from "./chunk-retriever";
import type { RankedChunk, StoredChunk } from "./retrieval";

/**
 * One shard's steps of a query over a sharded knowledge base. The Worker (sharded-retrieval.ts)
 * runs ChunkRetriever.retrieve's pipeline itself, asking every shard for these pieces and merging
 * them: first the collection statistics, so every shard scores BM25 with the whole base's chunk
 * count, average length and document frequencies; then candidates scored with them; then the
 * texts, titles and vectors that feedback, title boost and the answer need. Rows are named by
 * their rowid in this shard.
 */
export type StageRequest =
  | { kind: "stats"; words: string[]; frequencies: boolean; stems: string[]; filter?: FilterNode }
  | { kind: "keyword"; stems: [string, number][]; stats: KeywordStats; depth: number; filter?: FilterNode }
  | { kind: "vector"; vector: number[]; pool?: number; filter?: FilterNode }
  | { kind: "vectorHits"; hits: Scored[]; filter?: FilterNode }
  | { kind: "feedback"; rowids: number[] }
  | { kind: "titles"; rowids: number[] }
  | { kind: "vectorsOf"; rowids: number[] }
  | { kind: "nearestAmong"; vector: number[]; depth: number; rowids: number[] }
  | { kind: "rows"; rowids: number[] }
  | { kind: "pageTexts"; ranked: RankedChunk[] };

export interface StatsResult {
  /** Each word's stems as FTS5 gives them. */
  stemsOf: Record<string, string[]>;
  /** Chunks matching each word (only when asked: selectTerms needs it for long queries). */
  frequency: Record<string, number>;
  keyword: KeywordStats;
  /** Chunks the filter admits, when there is one; vectors held. */
  allowed: number;
  vectors: number;
  backlog: { documents: number; chunks: number };
}

export interface StageResults {
  stats: StatsResult;
  keyword: Scored<number>[];
  vector: { rowid: number; approx: number; score: number }[];
  vectorHits: Scored<number>[];
  feedback: { rowid: number; stems: [string, number][] }[];
  titles: { rowid: number; stems: string[] }[];
  vectorsOf: { rowid: number; values: number[] }[];
  nearestAmong: Scored<number>[];
  rows: { rowid: number; chunk: StoredChunk }[];
  pageTexts: [string, string][];
}

export type StageKind = StageRequest["kind"];
export type StageOf<K extends StageKind> = Extract<StageRequest, { kind: K }>;

export class ShardStages {
  constructor(
    private readonly vectors: VectorStore,
    private readonly keywords: KeywordScorer,
    private readonly retriever: ChunkRetriever,
    private readonly backlog: () => { documents: number; chunks: number },
  ) {}

  run<K extends StageKind>(request: StageOf<K>): StageResults[K] {
    return this.dispatch(request as StageRequest) as StageResults[K];
  }

  private allowed(filter: FilterNode | undefined): Set<number> | undefined {
    return filter ? this.retriever.allowedRowids(filter) : undefined;
  }

  private dispatch(r: StageRequest): StageResults[StageKind] {
    switch (r.kind) {
      case "stats":
        return this.stats(r);
      case "keyword":
        return this.keywords
          .scoreStems(new Map(r.stems), r.depth, this.allowed(r.filter), r.stats)
          .map((h) => ({ id: h.rowid, score: h.score }));
      case "vector":
        // Without a pool the caller chose the exact path (a filter admitting few rows of the whole base).
        return this.vectors.scan(r.vector, r.pool, this.allowed(r.filter));
      case "vectorHits":
        return this.retriever.rowidsOfHits(r.hits, this.allowed(r.filter));
      case "feedback":
        return this.retriever.rowsByRowid(r.rowids, "text").map((row) => ({
          rowid: row.rowid,
          stems: [...this.keywords.weightedStems(feedbackWords(row.text ?? ""))],
        }));
      case "titles":
        return this.retriever.rowsByRowid(r.rowids, "text, position").flatMap((row) => {
          const title = leadingTitle(row.text ?? "", row.position);
          return title
            ? [{ rowid: row.rowid, stems: [...this.keywords.weightedStems(feedbackWords(title)).keys()] }]
            : [];
        });
      case "vectorsOf":
        return r.rowids.flatMap((rowid) => {
          const values = this.vectors.valuesOf(rowid);
          return values ? [{ rowid, values }] : [];
        });
      case "nearestAmong":
        return this.vectors.nearest(r.vector, r.depth, new Set(r.rowids)).map((h) => ({ id: h.rowid, score: h.score }));
      case "rows":
        return this.retriever
          .rowsByRowid(r.rowids, "id, document_id, position, text, metadata")
          .map((row) => ({ rowid: row.rowid, chunk: toChunk(row) }));
      case "pageTexts":
        return this.retriever.pageTexts(r.ranked);
    }
  }

  private stats(r: StageOf<"stats">): StatsResult {
    const stemsOf: Record<string, string[]> = {};
    const all = new Set(r.stems);
    for (const word of r.words) {
      stemsOf[word] = [...this.keywords.weightedStems(new Map([[word, 1]])).keys()];
      for (const stem of stemsOf[word]) all.add(stem);
    }
    const frequency: Record<string, number> = {};
    if (r.frequencies) for (const word of r.words) frequency[word] = this.keywords.frequencyOf(word);
    return {
      stemsOf,
      frequency,
      keyword: this.keywords.collectionStats([...all]),
      allowed: r.filter ? this.countAllowed(r.filter) : 0,
      vectors: this.vectors.size,
      backlog: this.backlog(),
    };
  }

  private countAllowed(filter: FilterNode): number {
    return this.retriever.allowedRowids(filter).size;
  }
}
