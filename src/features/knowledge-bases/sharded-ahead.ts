import { globalKey, type ShardInfo } from "./index/shard-map";
import type { StoredChunk } from "./index/retrieval";
import { extrasCovered, type ExtrasResult, type StageExtras } from "./index/shard-stages";
import type { Scored } from "./index/hybrid-search";
import { rowidsByShard, type ShardScatter } from "./shard-scatter";

type Known<T> = Map<number, T | undefined>;

/**
 * Feedback texts, titles and chunk rows of a sharded query's candidates, by merged key: each read
 * once, from what a step sent ahead (shard-stages.ts StageExtras) or in one step for those not
 * sent, so the merge sees the same values either way (a key asked about and not answered, a row
 * deleted since, is known to have none, as a fetch would find).
 */
export class SentAhead {
  private readonly feedback: Known<[string, number][]> = new Map();
  private readonly titles: Known<string[]> = new Map();
  private readonly rows: Known<StoredChunk> = new Map();

  constructor(private readonly scatter: ShardScatter) {}

  /** One shard's extras, answered with its candidates `hits` (rowids, best first) to `asked`. */
  take(shard: ShardInfo, hits: Scored<number>[], asked: StageExtras | undefined, extras: ExtrasResult): void {
    if (!asked) return;
    const key = (rowid: number) => globalKey(shard.index, rowid);
    for (const r of extrasCovered(hits, asked)) this.rows.set(key(r), undefined);
    for (const r of extras.rows ?? []) this.rows.set(key(r.rowid), r.chunk);
  }

  /** Feedback stems of chunks (merged keys); none for a chunk no shard answered about. */
  async feedbackOf(keys: number[]): Promise<Map<number, [string, number][]>> {
    const absent = keys.filter((k) => !this.feedback.has(k));
    for (const [s, list] of await this.scatter.byShard<"feedback">(absent, (rowids) => ({ kind: "feedback", rowids })))
      for (const f of list) this.feedback.set(globalKey(s.index, f.rowid), f.stems);
    return known(this.feedback, keys);
  }

  /** Title stems of the chunks that have a title. */
  async titlesOf(keys: number[]): Promise<Map<number, string[]>> {
    const absent = keys.filter((k) => !this.titles.has(k));
    for (const [s, list] of await this.scatter.byShard<"titles">(absent, (rowids) => ({ kind: "titles", rowids })))
      for (const t of list) this.titles.set(globalKey(s.index, t.rowid), t.stems);
    return known(this.titles, keys);
  }

  /** Chunk rows of merged keys. */
  async rowsOf(keys: number[]): Promise<Map<number, StoredChunk>> {
    const absent = keys.filter((k) => !this.rows.has(k));
    for (const [s, list] of await this.scatter.byShard<"rows">(absent, (rowids) => ({ kind: "rows", rowids })))
      for (const r of list) this.rows.set(globalKey(s.index, r.rowid), r.chunk);
    return known(this.rows, keys);
  }

  /** Rowids of some merged keys held by one shard (what a step asks that shard about). */
  static rowidsOn(shard: ShardInfo, keys: number[]): number[] {
    return rowidsByShard(keys).get(shard.index) ?? [];
  }
}

function known<T>(from: Known<T>, keys: number[]): Map<number, T> {
  const out = new Map<number, T>();
  for (const k of keys) {
    const v = from.get(k);
    if (v !== undefined) out.set(k, v);
  }
  return out;
}
