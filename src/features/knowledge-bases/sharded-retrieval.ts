import { matchesFilter } from "./metadata-filter";
import type { Scored } from "./index/hybrid-search";
import { MAX_SCORED_TERMS, queryTermCounts, selectTerms } from "./index/keyword-query";
import { expandWithFeedback, FEEDBACK } from "./index/keyword-feedback";
import { bm25Idf, type KeywordStats } from "./index/keyword-scorer";
import { boostTitles, TITLE_BOOST } from "./index/title-boost";
import { rocchio, VECTOR_FEEDBACK } from "./index/vector-feedback";
import { SPARSE_FILTER_SHARE } from "./index/vector-store";
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
import { byScore, knownDfOf, rememberDf, statsFor, sumStats, type GlobalStats } from "./sharded-stats";
import type { StageExtras } from "./index/shard-stages";

/**
 * ChunkRetriever.retrieve's pipeline over a sharded knowledge base, run in the Worker: each step
 * asks every shard (shard-stages.ts) and merges here, so every decision one index would take on
 * its whole set is taken here on the whole set. BM25 is scored with the base's chunk count, total
 * length and document frequencies (a first step sums them); keyword feedback, title boost, vector
 * feedback and fusion run on the merged lists; the vector search reproduces one index's int8 pool.
 * Merged lists order ties by (rowid, shard), which a split keeps (shard-map.ts globalKey).
 *
 * Each step is one round trip to every shard, and the shards' work is small beside it, so steps
 * are folded where the result stays exact: the unfiltered vector pool comes with the statistics,
 * titles with the last keyword candidates, and feedback texts and the answer's chunk rows are
 * sent ahead for the candidates most likely to need them (sharded-ahead.ts fetches the rest).
 */

export class ShardedRetrieval {
  private readonly ahead: SentAhead;

  constructor(private readonly scatter: ShardScatter) {
    this.ahead = new SentAhead(scatter);
  }

  private async stats(
    words: string[],
    frequencies: boolean,
    stems: string[],
    filter: RetrieveRequest["filter"],
    nearest?: { vector: Float32Array; pool: number },
  ) {
    const answers = await this.scatter.all<"stats">({ kind: "stats", words, frequencies, stems, filter, nearest });
    rememberDf(this.scatter.kbId, answers);
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
  ) {
    const base = { kind: "keyword" as const, stems: [...stems], stats: statsFor(stems.keys(), stats), depth, filter };
    const asked = new Map<number, StageExtras | undefined>();
    const answers = await this.scatter.all<"keyword">((shard) => {
      const e = extras?.(shard);
      asked.set(shard.index, e);
      return e ? { ...base, extras: e } : base;
    });
    for (const [s, a] of answers) this.ahead.take(s, a.hits, asked.get(s.index), a.extras);
    return answers
      .flatMap(([s, a]) => a.hits.map((h) => ({ key: globalKey(s.index, h.id), score: h.score })))
      .sort(byScore)
      .slice(0, depth)
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
   * for the merged head only: sent ahead from every shard's head they cost more (stemming a dozen
   * times the chunks) than the round trip they save.
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
    const hits = await this.keywordTop(query, global.keyword, depth, request.filter, feedback ? undefined : last);
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

  /** VectorStore.nearest over the shards: the same int8 pool (or the same exact path under a narrow filter). */
  private async vectorTop(vector: number[], request: RetrieveRequest, global: GlobalStats): Promise<Scored<number>[]> {
    if (global.vectors === 0) return [];
    const sparse = request.filter !== undefined && global.allowed < global.vectors * SPARSE_FILTER_SHARE;
    const pool = Math.min(global.vectors, request.depth * 2 + 64);
    // Unfiltered, each shard sent its pool with the statistics (each pool holds every chunk of the
    // merged pool that shard has, as it holds its best `pool` by the same int8 score).
    let candidates =
      global.nearest ??
      (
        await this.scatter.all<"vector">({
          kind: "vector",
          vector: Float32Array.from(vector),
          pool: sparse ? undefined : pool,
          filter: request.filter,
        })
      ).flatMap(([s, list]) =>
        list.map((c) => ({ key: globalKey(s.index, c.rowid), approx: c.approx, score: c.score })),
      );
    if (!sparse) candidates = candidates.sort((a, b) => b.approx - a.approx || a.key - b.key).slice(0, pool);
    return candidates
      .sort(byScore)
      .slice(0, request.depth)
      .map((c) => ({ id: c.key, score: c.score }));
  }

  /** Vectorize's matches (chunk ids, best first) as merged keys, each shard naming its own. */
  private async vectorHits(hits: Scored[], request: RetrieveRequest): Promise<Scored<number>[]> {
    // Each hit's position rides in its score, so the merged list keeps Vectorize's order.
    const answers = await this.scatter.all<"vectorHits">({
      kind: "vectorHits",
      hits: hits.map((h, i) => ({ id: h.id, score: i })),
      filter: request.filter,
    });
    return answers
      .flatMap(([s, list]) => list.map((r) => ({ at: r.score, id: globalKey(s.index, r.id) })))
      .sort((a, b) => a.at - b.at)
      .map((r) => ({ id: r.id, score: hits[r.at].score }));
  }

  private async vectorFeedback(
    query: number[],
    keyword: Scored<number>[],
    vector: Scored<number>[],
    request: RetrieveRequest,
  ): Promise<Scored<number>[]> {
    const top = fuseHalves(keyword, vector, request).slice(0, VECTOR_FEEDBACK.docs);
    const values = new Map<number, number[]>();
    for (const [s, list] of await this.scatter.byShard<"vectorsOf">(
      top.map((t) => t.id),
      (rowids) => ({ kind: "vectorsOf", rowids }),
    ))
      for (const v of list) values.set(globalKey(s.index, v.rowid), v.values);
    const feedbackVectors = top.map((t) => values.get(t.id)).filter((v): v is number[] => v !== undefined);
    if (feedbackVectors.length === 0) return vector;
    const moved = Float32Array.from(rocchio(query, feedbackVectors));
    const candidates = [...new Set([...vector, ...keyword].map((c) => c.id))];
    // The last step of the query: it brings the rows of each shard's best and of the keyword
    // half's head, which the answer most likely shows.
    const rowsAhead = keyword.slice(0, request.topK).map((h) => h.id);
    const asked = new Map<number, StageExtras>();
    const answers = await this.scatter.byShard<"nearestAmong">(candidates, (rowids, shard) => {
      const extras: StageExtras = { rowsTop: request.topK, rowids: SentAhead.rowidsOn(shard, rowsAhead) };
      asked.set(shard.index, extras);
      return { kind: "nearestAmong", vector: moved, depth: request.depth, rowids, extras };
    });
    for (const [s, a] of answers) this.ahead.take(s, a.hits, asked.get(s.index), a.extras);
    return answers
      .flatMap(([s, a]) => a.hits.map((h) => ({ key: globalKey(s.index, h.id), score: h.score })))
      .sort(byScore)
      .slice(0, request.depth)
      .map((h) => ({ id: h.key, score: h.score }));
  }

  private async oneQuery(
    query: RetrieveRequest["queries"][number],
    request: RetrieveRequest,
  ): Promise<{ fused: Scored<number>[]; global: GlobalStats }> {
    const words = [...queryTermCounts(query.text).keys()];
    // Unfiltered, the vector step needs no statistics (no filter to count), so it comes with them.
    const nearest =
      request.mode !== "keyword" && query.vector && request.filter === undefined
        ? { vector: Float32Array.from(query.vector), pool: request.depth * 2 + 64 }
        : undefined;
    const global = await this.stats(words, words.length > MAX_SCORED_TERMS, [], request.filter, nearest);
    let vector: Scored<number>[] = [];
    if (request.mode !== "keyword" && query.vector) vector = await this.vectorTop(query.vector, request, global);
    else if (request.mode !== "keyword" && query.vectorHits) vector = await this.vectorHits(query.vectorHits, request);
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
            request.mode === "keyword" ? () => ({ rowsTop: request.topK }) : undefined,
          )
        : [];
    if (request.mode === "hybrid" && query.vector && vector.length && keyword.length)
      vector = await this.vectorFeedback(query.vector, keyword, vector, request);
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
