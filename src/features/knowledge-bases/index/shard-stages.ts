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
 *
 * Every step is a round trip to every shard, so a step also carries what the next one is likely
 * to need: the unfiltered vector pool with the statistics, and (`extras`) chunk rows or the int8
 * vectors of the last candidates. The Worker checks that what it then needs was sent and asks only for what is
 * missing, so answers stay exact; the extras only save a round trip. Query vectors travel as
 * Float32Array: the vector store rounds a query to float32 before scoring anyway (so the scores
 * are the same), and a typed array copies in one piece where an array of numbers is cloned
 * element by element, to every shard.
 */
export interface StageExtras {
  /** Chunk rows of this shard's `rowsTop` best candidates and of `rowids`. */
  rowsTop?: number;
  rowids?: number[];
  /** The int8 vectors of all this answer's candidates (RowCodes). */
  codes?: boolean;
}

/**
 * Some rows' int8 vectors and scales as the shard's scan holds them (VectorStore.codesOf): rows
 * asked about and not listed have no vector. The Worker scores vector feedback over the query's
 * candidates with them (sharded-codes.ts) instead of one more round to every shard.
 */
export interface RowCodes {
  rowids: Int32Array;
  scales: Float32Array;
  codes: Int8Array;
  dims: number;
}

export type StageRequest =
  | {
      kind: "stats";
      words: string[];
      frequencies: boolean;
      stems: string[];
      filter?: FilterNode;
      /** The unfiltered vector step at once (it needs no statistics then): the int8 pool of this size. */
      /** With `codes`, the int8 vectors of the pool's `codes` best rows by exact score (RowCodes). */
      nearest?: { vector: Float32Array; pool: number; codes?: number };
      /** Only the keyword statistics are read (RM3's stems): the backlog is not counted (answered as none). */
      keywordOnly?: boolean;
    }
  | {
      kind: "keyword";
      stems: [string, number][];
      stats: KeywordStats;
      depth: number;
      /** Only the first `head` of the `depth` best (exactly those; KeywordScorer.scoreStems). */
      head?: number;
      filter?: FilterNode;
      extras?: StageExtras;
    }
  | { kind: "vector"; vector: Float32Array; pool?: number; filter?: FilterNode }
  | { kind: "vectorHits"; hits: Scored[]; filter?: FilterNode }
  | { kind: "feedback"; rowids: number[] }
  | { kind: "titles"; rowids: number[] }
  | { kind: "vectorsOf"; rowids: number[] }
  | { kind: "nearestAmong"; vector: Float32Array; depth: number; rowids: number[]; extras?: StageExtras }
  | { kind: "rows"; rowids: number[] }
  | { kind: "pageTexts"; ranked: RankedChunk[] };

/** What a step's extras brought back (see StageExtras). */
export interface ExtrasResult {
  rows?: StageResults["rows"];
  codes?: RowCodes;
}

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
  /** Names this shard's keyword statistics as they stand (KeywordScorer.version): a write changes it. */
  version: string;
  /** The vector step's answer when asked with the statistics. */
  nearest?: StageResults["vector"];
  /** The int8 vectors of `nearest`'s rows, when asked. */
  codes?: RowCodes;
}

export interface StageResults {
  stats: StatsResult;
  keyword: { hits: Scored<number>[]; extras: ExtrasResult };
  vector: { rowid: number; approx: number; score: number }[];
  vectorHits: Scored<number>[];
  feedback: { rowid: number; stems: [string, number][] }[];
  titles: { rowid: number; stems: string[] }[];
  vectorsOf: { rowid: number; values: number[] }[];
  nearestAmong: { hits: Scored<number>[]; extras: ExtrasResult };
  rows: { rowid: number; chunk: StoredChunk }[];
  pageTexts: [string, string][];
}

/** The rows of a pool whose codes a stats step sends (the Worker computes the same from the pool). */
export function poolCoded(pool: StageResults["vector"], n: number): number[] {
  return [...pool]
    .sort((a, b) => b.score - a.score || a.rowid - b.rowid)
    .slice(0, n)
    .map((c) => c.rowid);
}

/** The rowids a step's extras are about (the Worker computes the same from the hits it gets back). */
export function extrasCovered(hits: Scored<number>[], asked: StageExtras): number[] {
  return [...new Set([...hits.slice(0, asked.rowsTop ?? 0).map((h) => h.id), ...(asked.rowids ?? [])])];
}

export type StageKind = StageRequest["kind"];
export type StageOf<K extends StageKind> = Extract<StageRequest, { kind: K }>;

/** Rows whose title stems a shard keeps between queries (~1 MB at most; a query asks ~50 over all shards). */
const MAX_CACHED_TITLES = 5_000;

export class ShardStages {
  private titleCache: { version: string; stems: Map<number, string[] | null> } = { version: "", stems: new Map() };

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
      case "keyword": {
        const hits = this.keywords
          .scoreStems(new Map(r.stems), r.depth, this.allowed(r.filter), r.stats, r.head)
          .map((h) => ({ id: h.rowid, score: h.score }));
        return { hits, extras: this.extras(hits, r.extras) };
      }
      case "vector":
        // Without a pool the caller chose the exact path (a filter admitting few rows of the whole base).
        return this.vectors.scan(r.vector, r.pool, this.allowed(r.filter));
      case "vectorHits":
        return this.retriever.rowidsOfHits(r.hits, this.allowed(r.filter));
      case "feedback":
        return this.feedback(r.rowids);
      case "titles":
        return this.titles(r.rowids);
      case "vectorsOf":
        return r.rowids.flatMap((rowid) => {
          const values = this.vectors.valuesOf(rowid);
          return values ? [{ rowid, values }] : [];
        });
      case "nearestAmong": {
        const hits = this.vectors
          .nearest(r.vector, r.depth, new Set(r.rowids))
          .map((h) => ({ id: h.rowid, score: h.score }));
        return { hits, extras: this.extras(hits, r.extras) };
      }
      case "rows":
        return this.rows(r.rowids);
      case "pageTexts":
        return this.retriever.pageTexts(r.ranked);
    }
  }

  private feedback(rowids: number[]): StageResults["feedback"] {
    return this.retriever.rowsByRowid(rowids, "text").map((row) => ({
      rowid: row.rowid,
      stems: [...this.keywords.weightedStems(feedbackWords(row.text ?? ""))],
    }));
  }

  /**
   * Title stems of some rows: read and stemmed once per row while the shard's statistics version
   * stands (every write changes it, so a kept title is the row's as it is now), since the title
   * step asks every shard about the merged head's rows on every query, mostly the same rows.
   */
  private titles(rowids: number[]): StageResults["titles"] {
    const version = this.keywords.version();
    if (this.titleCache.version !== version) this.titleCache = { version, stems: new Map() };
    const cache = this.titleCache.stems;
    const unknown = rowids.filter((r) => !cache.has(r));
    for (const r of unknown) cache.set(r, null);
    // Only a document's first chunk has a title (leadingTitle): the others are not read at all.
    for (const row of this.retriever.firstChunkTexts(unknown)) {
      const title = leadingTitle(row.text ?? "", 0);
      if (title) cache.set(row.rowid, [...this.keywords.weightedStems(feedbackWords(title)).keys()]);
    }
    if (cache.size > MAX_CACHED_TITLES) this.titleCache = { version, stems: new Map() };
    return rowids.flatMap((rowid) => {
      const stems = cache.get(rowid);
      return stems ? [{ rowid, stems }] : [];
    });
  }

  private rows(rowids: number[]): StageResults["rows"] {
    return this.retriever
      .rowsByRowid(rowids, "id, document_id, position, text, metadata")
      .map((row) => ({ rowid: row.rowid, chunk: toChunk(row) }));
  }

  /** The extras a step was asked for, about its candidates `hits` (best first). */
  private extras(hits: Scored<number>[], asked: StageExtras | undefined): ExtrasResult {
    if (!asked) return {};
    const rowids = extrasCovered(hits, asked);
    const out: ExtrasResult = rowids.length ? { rows: this.rows(rowids) } : {};
    if (asked.codes) out.codes = this.vectors.codesOf(hits.map((h) => h.id));
    return out;
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
      backlog: r.keywordOnly ? { documents: 0, chunks: 0 } : this.backlog(),
      version: this.keywords.version(),
      ...(r.nearest ? this.nearestWithStats(r.nearest) : {}),
    };
  }

  private nearestWithStats(r: NonNullable<StageOf<"stats">["nearest"]>): Pick<StatsResult, "nearest" | "codes"> {
    const nearest = this.vectors.scan(r.vector, r.pool, undefined);
    if (!r.codes) return { nearest };
    // The merged top by exact score takes a shard's rows from the best of its pool by that score
    // (almost always its first `codes`; a row outside them is asked for, sharded-vector-half.ts).
    return { nearest, codes: this.vectors.codesOf(poolCoded(nearest, r.codes)) };
  }

  private countAllowed(filter: FilterNode): number {
    return this.retriever.allowedRowids(filter).size;
  }
}
