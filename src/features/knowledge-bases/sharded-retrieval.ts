import { matchesFilter } from "./metadata-filter";
import type { Scored } from "./index/hybrid-search";
import { MAX_SCORED_TERMS, queryTermCounts, selectTerms } from "./index/keyword-query";
import { expandWithFeedback, FEEDBACK } from "./index/keyword-feedback";
import { bm25Idf, type KeywordStats } from "./index/keyword-scorer";
import { boostTitles, TITLE_BOOST } from "./index/title-boost";
import { MAX_TOP_K } from "./index/vector-index";
import { globalKey, type ShardInfo } from "./index/shard-map";
import type { KeywordHit } from "./index/chunk-retriever";
import {
  applyLimits,
  fuseHalves,
  fuseQueries,
  keepTopGroups,
  needsShaping,
  type RankedChunk,
  type RetrieveRequest,
  type RetrieveResult,
} from "./index/retrieval";
import type { ShardScatter } from "./shard-scatter";
import { SentAhead } from "./sharded-ahead";
import { ShardedVectorHalf } from "./sharded-vector-half";
import { byScore, knownDfOf, rememberDf, statsFor, sumStats, type GlobalStats } from "./sharded-stats";
import { poolCoded, type StageExtras } from "./index/shard-stages";

/**
 * ChunkRetriever.retrieve's pipeline over a sharded knowledge base, run in the Worker: each step
 * asks every shard (shard-stages.ts) and merges here, so every decision one index would take on
 * its whole set is taken here on the whole set. BM25 is scored with the base's chunk count, total
 * length and document frequencies (a first step sums them); keyword feedback, title boost, vector
 * feedback and fusion run on the merged lists; the vector search reproduces one index's int8 pool.
 * Merged lists order ties by (rowid, shard), which a split keeps (shard-map.ts globalKey).
 *
 * Each step is one round trip to every shard, so steps are folded or cut where the result stays
 * exact: the unfiltered vector pool comes with the statistics; BM25's first pass asks each shard
 * for the feedback head only; in hybrid mode the candidates' int8 vectors come with the pool and
 * the last keyword pass, and vector feedback is scored here (sharded-vector-half.ts); the keyword
 * alone mode's chunk rows come with its last pass (sharded-ahead.ts fetches whatever is missing).
 */

export class ShardedRetrieval {
  private readonly ahead: SentAhead;
  private readonly vectors: ShardedVectorHalf;

  constructor(private readonly scatter: ShardScatter) {
    this.ahead = new SentAhead(scatter);
    this.vectors = new ShardedVectorHalf(scatter, this.ahead);
  }

  private async stats(
    words: string[],
    frequencies: boolean,
    stems: string[],
    filter: RetrieveRequest["filter"],
    nearest?: { vector: Float32Array; pool: number; codes?: number },
  ) {
    const answers = await this.scatter.all<"stats">({ kind: "stats", words, frequencies, stems, filter, nearest });
    rememberDf(this.scatter.kbId, answers);
    for (const [s, a] of answers)
      if (a.nearest) this.vectors.codes.take(s, poolCoded(a.nearest, nearest?.codes ?? 0), a.codes);
    return sumStats(answers);
  }

  /**
   * The whole base's document frequency of some stems (RM3's candidates): each live shard's as an
   * earlier answer gave it at the version that shard answered this query's statistics with
   * (sharded-stats.ts), the rest asked of only the shards lacking some, in one step. Exact: a
   * shard's version changes with every write, so a kept count is one the shard would answer now.
   */
  private async frequencies(stems: string[], versions: Map<number, string>): Promise<Record<string, number>> {
    const kb = this.scatter.kbId;
    const df: Record<string, number> = {};
    const unknown = new Map<number, string[]>();
    for (const shard of this.scatter.live()) {
      const version = versions.get(shard.index);
      const ask: string[] = [];
      for (const stem of stems) {
        const n = version === undefined ? undefined : knownDfOf(kb, shard.index, version, stem);
        if (n === undefined) ask.push(stem);
        else df[stem] = (df[stem] ?? 0) + n;
      }
      if (ask.length) unknown.set(shard.index, ask);
    }
    if (unknown.size === 0) return df;
    // Only the document frequencies are read from this answer, so no filter is counted for it.
    const answers = await this.scatter.some<"stats">(new Set(unknown.keys()), (shard) => ({
      kind: "stats",
      words: [],
      frequencies: false,
      stems: unknown.get(shard.index) ?? [],
      keywordOnly: true,
    }));
    rememberDf(kb, answers);
    for (const [, a] of answers) for (const [stem, n] of Object.entries(a.keyword.df)) df[stem] = (df[stem] ?? 0) + n;
    return df;
  }

  /** The `depth` best chunks by BM25 with the whole base's statistics. */
  private async keywordTop(
    stems: Map<string, number>,
    stats: KeywordStats,
    depth: number,
    filter: RetrieveRequest["filter"],
    extras?: (shard: ShardInfo) => StageExtras | undefined,
    head?: number,
  ) {
    const base = {
      kind: "keyword" as const,
      stems: [...stems],
      stats: statsFor(stems.keys(), stats),
      depth,
      filter,
      ...(head === undefined ? {} : { head }),
    };
    const asked = new Map<number, StageExtras | undefined>();
    const answers = await this.scatter.all<"keyword">((shard) => {
      const e = extras?.(shard);
      asked.set(shard.index, e);
      return e ? { ...base, extras: e } : base;
    });
    for (const [s, a] of answers) {
      this.ahead.take(s, a.hits, asked.get(s.index), a.extras);
      this.vectors.codes.take(
        s,
        a.hits.map((h) => h.id),
        a.extras.codes,
      );
    }
    return answers
      .flatMap(([s, a]) => a.hits.map((h) => ({ key: globalKey(s.index, h.id), score: h.score })))
      .sort(byScore)
      .slice(0, head ?? depth)
      .map((h) => ({ id: h.key, score: h.score }));
  }

  private async boost(hits: Scored<number>[], query: Map<string, number>, stats: KeywordStats) {
    const titles = await this.ahead.titlesOf(hits.slice(0, TITLE_BOOST.rerank).map((h) => h.id));
    if (titles.size === 0) return hits;
    return boostTitles(
      hits,
      (key) => titles.get(key),
      query,
      (stem) => bm25Idf(stats.chunks, stats.df[stem] ?? 0),
    );
  }

  /**
   * ChunkRetriever.keywordRows over the shards (without its FTS5 fallback: a failing shard is
   * reported missing); the last pass brings `last`'s extras. Feedback texts and titles are asked
   * for the merged head only: sent ahead from every shard's head they cost more than the round
   * trip they save (stemming a dozen times the texts; for titles, a SQLite row lookup for each
   * shard's 50 best instead of the merged 50: measured, BENCHMARKS.md fifth pass).
   */
  private async keywordRows(
    text: string,
    depth: number,
    request: Pick<RetrieveRequest, "filter">,
    global: GlobalStats,
    feedback: boolean,
    last?: (shard: ShardInfo) => StageExtras,
  ): Promise<Scored<number>[]> {
    const counts = queryTermCounts(text);
    if (counts.size === 0) return [];
    const chosen = selectTerms([...counts.keys()], (t) => global.frequency[t] ?? 0);
    if (chosen.length === 0) return [];
    const query = new Map<string, number>();
    for (const word of chosen)
      for (const stem of global.stemsOf[word] ?? []) query.set(stem, (query.get(stem) ?? 0) + (counts.get(word) ?? 1));
    // With feedback this pass serves only its first FEEDBACK.docs rows (and whether it has 2), as
    // in ChunkRetriever: each shard sends its own first FEEDBACK.docs, which hold the merged first
    // FEEDBACK.docs (a shard orders equal scores by rowid, the merge by rowid then shard, so the
    // merged head takes from each shard a prefix of that shard's own order).
    const hits = await this.keywordTop(
      query,
      global.keyword,
      depth,
      request.filter,
      feedback ? undefined : last,
      feedback ? FEEDBACK.docs : undefined,
    );
    if (feedback === false || hits.length < 2) return this.boost(hits, query, global.keyword);
    const top = hits.slice(0, FEEDBACK.docs);
    const texts = await this.ahead.feedbackOf(top.map((h) => h.id));
    const docs = top.map((h) => ({ stems: new Map(texts.get(h.id) ?? []), score: h.score }));
    // The stems RM3 looks the idf of up (its strongest candidates), asked of every shard once.
    const asked: string[] = [];
    expandWithFeedback(query, docs, (stem) => {
      asked.push(stem);
      return 1;
    });
    const more = asked.length ? await this.frequencies(asked, global.versions) : {};
    const stats: KeywordStats = { ...global.keyword, df: { ...global.keyword.df, ...more } };
    const expanded = expandWithFeedback(query, docs, (stem) =>
      Math.log(1 + stats.chunks / (1 + (stats.df[stem] ?? 0))),
    );
    return this.boost(await this.keywordTop(expanded, stats, depth, request.filter, last), expanded, stats);
  }

  private async oneQuery(
    query: RetrieveRequest["queries"][number],
    request: RetrieveRequest,
  ): Promise<{ fused: Scored<number>[]; global: GlobalStats }> {
    const words = [...queryTermCounts(query.text).keys()];
    // Vector feedback follows: the candidates' int8 vectors come with the pool and the last
    // keyword pass, and the Worker scores it (sharded-vector-half.ts).
    const codes = request.mode === "hybrid" && query.vector !== undefined;
    // Unfiltered, the vector step needs no statistics (no filter to count), so it comes with them.
    const nearest =
      request.mode !== "keyword" && query.vector && request.filter === undefined
        ? {
            vector: Float32Array.from(query.vector),
            pool: request.depth * 2 + 64,
            ...(codes ? { codes: request.depth } : {}),
          }
        : undefined;
    const global = await this.stats(words, words.length > MAX_SCORED_TERMS, [], request.filter, nearest);
    let vector: Scored<number>[] = [];
    if (request.mode !== "keyword" && query.vector) vector = await this.vectors.top(query.vector, request, global);
    else if (request.mode !== "keyword" && query.vectorHits)
      vector = await this.vectors.hits(query.vectorHits, request);
    // Feedback chunks from BM25's own first pass, as ChunkRetriever.retrieve takes them.
    const keyword =
      request.mode !== "vector"
        ? await this.keywordRows(
            query.text,
            request.depth,
            request,
            global,
            true,
            // Keyword alone, the answer's rows most likely are the last pass's best.
            request.mode === "keyword" ? () => ({ rowsTop: request.topK }) : codes ? () => ({ codes }) : undefined,
          )
        : [];
    if (request.mode === "hybrid" && query.vector && vector.length && keyword.length)
      vector = await this.vectors.feedback(query.vector, keyword, vector, request);
    return { fused: fuseHalves(keyword, vector, request), global };
  }

  /** ChunkRetriever.retrieve, over the shards. */
  async retrieve(request: RetrieveRequest): Promise<RetrieveResult> {
    const perQuery = await Promise.all(request.queries.map((q) => this.oneQuery(q, request)));
    const shortlist = fuseQueries(
      perQuery.map((q) => q.fused),
      request.dataFusion,
    )
      .filter((s) => request.scoreCutoff === undefined || s.score >= request.scoreCutoff)
      .slice(0, request.depth);
    const shaping = needsShaping(request);
    const ranked: RankedChunk[] = [];
    const batch = shaping ? shortlist.length : request.topK;
    for (let i = 0; i < shortlist.length && (shaping || ranked.length < request.topK); i += batch) {
      const part = shortlist.slice(i, i + batch);
      const rows = await this.ahead.rowsOf(part.map((s) => s.id));
      for (const s of part) {
        const chunk = rows.get(s.id);
        if (!chunk) continue;
        if (request.filter && !matchesFilter(request.filter, chunk.metadata)) continue;
        ranked.push({ chunk, score: s.score });
      }
    }
    const kept = keepTopGroups(request.unit, applyLimits(ranked, request), request.topK);
    const pageTexts = request.unit === "pages" ? await this.pageTexts(kept) : [];
    const backlog = perQuery[0]?.global.backlog;
    return { ranked: kept, pageTexts, ...(backlog && backlog.chunks > 0 ? { indexing: backlog } : {}) };
  }

  /** Each page's whole text, from the shard holding its document. */
  private async pageTexts(kept: RankedChunk[]): Promise<[string, string][]> {
    const answers = await this.scatter.all<"pageTexts">({ kind: "pageTexts", ranked: kept });
    const texts = new Map<string, string>();
    for (const [, list] of answers) for (const [key, text] of list) if (!texts.has(key)) texts.set(key, text);
    return [...texts];
  }

  /** ChunkRetriever.keywordSearch over the shards: plain BM25 (title boost, no feedback). */
  async keywordSearch(
    text: string,
    options: { topK: number; filter?: RetrieveRequest["filter"] },
  ): Promise<KeywordHit[]> {
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    const words = [...queryTermCounts(text).keys()];
    const global = await this.stats(words, words.length > MAX_SCORED_TERMS, [], options.filter);
    const rows = await this.keywordRows(text, topK, options, global, false, () => ({ rowsTop: topK }));
    const chunks = await this.ahead.rowsOf(rows.map((r) => r.id));
    return rows.flatMap((r) => {
      const chunk = chunks.get(r.id);
      if (!chunk || (options.filter && !matchesFilter(options.filter, chunk.metadata))) return [];
      return [{ id: chunk.id, score: r.score }];
    });
  }
}
