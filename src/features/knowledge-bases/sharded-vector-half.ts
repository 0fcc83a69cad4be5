import type { Scored } from "./index/hybrid-search";
import { fuseHalves, type RetrieveRequest } from "./index/retrieval";
import { globalKey, splitKey } from "./index/shard-map";
import type { StageExtras } from "./index/shard-stages";
import { rocchio, VECTOR_FEEDBACK } from "./index/vector-feedback";
import { SPARSE_FILTER_SHARE } from "./index/vector-store";
import type { ShardScatter } from "./shard-scatter";
import { SentAhead } from "./sharded-ahead";
import { SentCodes } from "./sharded-codes";
import { byScore, type GlobalStats } from "./sharded-stats";

/**
 * ChunkRetriever.retrieve's vector half over a sharded knowledge base (sharded-retrieval.ts runs
 * the rest): the merged int8 pool, Vectorize's matches by shard, and vector feedback, scored in
 * the Worker from the candidates' int8 vectors when the shards sent them all (sharded-codes.ts),
 * else asked of the shards holding them.
 */
export class ShardedVectorHalf {
  readonly codes = new SentCodes();

  constructor(
    private readonly scatter: ShardScatter,
    private readonly ahead: SentAhead,
  ) {}

  /** Keys whose shard has not failed in this query (a failed shard's rows are left out, as its answers are). */
  private live(keys: number[]): number[] {
    return keys.filter((k) => !this.scatter.missing.has(splitKey(k).shard));
  }

  /** The stored values of the fused head's vectors: from the codes sent, or one step to the shards holding them. */
  private async valuesOf(keys: number[]): Promise<Map<number, number[]>> {
    const values = new Map<number, number[]>();
    if (this.codes.knows(keys)) {
      for (const key of this.live(keys)) {
        const v = this.codes.valuesOf(key);
        if (v) values.set(key, v);
      }
      return values;
    }
    for (const [s, list] of await this.scatter.byShard<"vectorsOf">(keys, (rowids) => ({ kind: "vectorsOf", rowids })))
      for (const v of list) values.set(globalKey(s.index, v.rowid), v.values);
    return values;
  }

  /** VectorStore.nearest over the shards: the same int8 pool (or the same exact path under a narrow filter). */
  async top(vector: number[], request: RetrieveRequest, global: GlobalStats): Promise<Scored<number>[]> {
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
  async hits(hits: Scored[], request: RetrieveRequest): Promise<Scored<number>[]> {
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

  async feedback(
    query: number[],
    keyword: Scored<number>[],
    vector: Scored<number>[],
    request: RetrieveRequest,
  ): Promise<Scored<number>[]> {
    const top = fuseHalves(keyword, vector, request).slice(0, VECTOR_FEEDBACK.docs);
    const values = await this.valuesOf(top.map((t) => t.id));
    const feedbackVectors = top.map((t) => values.get(t.id)).filter((v): v is number[] => v !== undefined);
    if (feedbackVectors.length === 0) return vector;
    const moved = Float32Array.from(rocchio(query, feedbackVectors));
    const candidates = [...new Set([...vector, ...keyword].map((c) => c.id))];
    // Every candidate's vector came with the pool and the last keyword pass: scored here, and the
    // answer's rows are then read for the final top only (SentAhead.rowsOf).
    if (this.codes.knows(candidates)) return this.codes.nearest(moved, request.depth, this.live(candidates));
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
}
