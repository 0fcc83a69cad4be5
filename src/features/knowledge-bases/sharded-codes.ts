import { globalKey, type ShardInfo } from "./index/shard-map";
import type { RowCodes } from "./index/shard-stages";
import { dotRow } from "./index/vector-scan";
import { byScore } from "./sharded-stats";

type Code = { row: Int8Array; scale: number } | null;

/**
 * The int8 vectors of a sharded query's candidates, by merged key, as the shards sent them with
 * the vector pool and the last keyword pass (shard-stages.ts RowCodes). Vector feedback needs the
 * vectors of the fused head and then the moved query's nearest among the candidates: with every
 * candidate's vector here, both are computed in the Worker with the shard's own arithmetic
 * (VectorStore.valuesOf, nearestIn's exact path: dotRow times the row's scale), so the answer is
 * the one the shards would give, without the two rounds to every shard. A key asked about and not
 * answered has no vector (null); a key never asked about is unknown, and the caller asks the shards.
 */
export class SentCodes {
  private readonly codes = new Map<number, Code>();

  /** One shard's codes for its rows `asked` (a row asked about and not in `codes` has no vector). */
  take(shard: ShardInfo, asked: ArrayLike<number>, codes: RowCodes | undefined): void {
    if (!codes) return;
    for (let i = 0; i < asked.length; i++) {
      const key = globalKey(shard.index, asked[i]);
      if (!this.codes.has(key)) this.codes.set(key, null);
    }
    const { dims } = codes;
    codes.rowids.forEach((rowid, i) => {
      this.codes.set(globalKey(shard.index, rowid), {
        row: codes.codes.subarray(i * dims, (i + 1) * dims),
        scale: codes.scales[i],
      });
    });
  }

  /** Whether every key's vector (or its absence) is known. */
  knows(keys: Iterable<number>): boolean {
    for (const key of keys) if (!this.codes.has(key)) return false;
    return true;
  }

  /** A row's stored (dequantised) values, as VectorStore.valuesOf gives them. */
  valuesOf(key: number): number[] | undefined {
    const code = this.codes.get(key);
    if (!code) return undefined;
    return Array.from(code.row, (v) => v * code.scale);
  }

  /**
   * The `depth` nearest of `keys` to `query`, each scored as nearestIn's exact path scores it
   * (the shards take that path over a query's candidates, or score all of them exactly in their
   * pool: VectorStore.nearest). Equal scores by merged key, as the merge of the shards' answers.
   */
  nearest(query: ArrayLike<number>, depth: number, keys: number[]): { id: number; score: number }[] {
    const q = Float32Array.from(query);
    const scored: { key: number; score: number }[] = [];
    for (const key of keys) {
      const code = this.codes.get(key);
      if (!code || code.row.length !== q.length) continue;
      scored.push({ key, score: dotRow(code.row, 0, q.length, q) * code.scale });
    }
    return scored
      .sort(byScore)
      .slice(0, depth)
      .map((s) => ({ id: s.key, score: s.score }));
  }
}
