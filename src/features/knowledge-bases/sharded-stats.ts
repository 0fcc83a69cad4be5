import type { KeywordStats } from "./index/keyword-scorer";
import { globalKey, type ShardInfo } from "./index/shard-map";
import type { StatsResult } from "./index/shard-stages";

/**
 * Document frequencies shards answered, by knowledge base, shard, the shard's statistics version
 * (KeywordScorer.version: every write, drop or restart of the shard changes it) and stem, so a
 * query whose feedback stems were counted before at the same versions skips that step's round to
 * every shard. A stale entry is never read: its version no longer comes back. Bounded; the oldest
 * entry leaves first.
 */
const knownDf = new Map<string, number>();
const KNOWN_DF = 50_000;

function dfKey(kbId: string, shard: number, version: string, stem: string): string {
  return `${kbId}\n${shard}\n${version}\n${stem}`;
}

/** Keeps the document frequencies of some shards' statistics answers under their versions. */
export function rememberDf(kbId: string, answers: [ShardInfo, StatsResult][]): void {
  for (const [shard, a] of answers)
    for (const [stem, n] of Object.entries(a.keyword.df)) {
      const key = dfKey(kbId, shard.index, a.version, stem);
      knownDf.delete(key);
      knownDf.set(key, n);
    }
  while (knownDf.size > KNOWN_DF) knownDf.delete(knownDf.keys().next().value ?? "");
}

/** A stem's document frequency in one shard at one version, if a statistics answer gave it. */
export function knownDfOf(kbId: string, shard: number, version: string, stem: string): number | undefined {
  return knownDf.get(dfKey(kbId, shard, version, stem));
}

/** The collection statistics of a query's words, summed over the shards (one shard's StatsResult, merged). */
export interface GlobalStats extends Omit<StatsResult, "nearest" | "version"> {
  /** Each answering shard's statistics version (by shard index). */
  versions: Map<number, string>;
  /** The vector step's candidates, when they came with the statistics (merged keys). */
  nearest?: { key: number; approx: number; score: number }[];
}

export function sumStats(answers: [ShardInfo, StatsResult][]): GlobalStats {
  const out: GlobalStats = {
    stemsOf: {},
    frequency: {},
    keyword: { chunks: 0, total: 0, df: {} },
    allowed: 0,
    vectors: 0,
    backlog: { documents: 0, chunks: 0 },
    versions: new Map(),
  };
  for (const [shard, a] of answers) {
    out.versions.set(shard.index, a.version);
    if (a.nearest) {
      out.nearest ??= [];
      for (const c of a.nearest) out.nearest.push({ key: globalKey(shard.index, c.rowid), ...c });
    }
    // Stemming is FTS5's and the same in every shard.
    Object.assign(out.stemsOf, a.stemsOf);
    for (const [w, n] of Object.entries(a.frequency)) out.frequency[w] = (out.frequency[w] ?? 0) + n;
    out.keyword.chunks += a.keyword.chunks;
    out.keyword.total += a.keyword.total;
    for (const [s, n] of Object.entries(a.keyword.df)) out.keyword.df[s] = (out.keyword.df[s] ?? 0) + n;
    out.allowed += a.allowed;
    out.vectors += a.vectors;
    out.backlog.documents += a.backlog.documents;
    out.backlog.chunks += a.backlog.chunks;
  }
  return out;
}

/** Best first, equal scores by key (rowid, then shard), as one index's TopK orders them. */
export function byScore<T extends { score: number; key: number }>(a: T, b: T): number {
  return b.score - a.score || a.key - b.key;
}

export function statsFor(stems: Iterable<string>, stats: KeywordStats): KeywordStats {
  const df: Record<string, number> = {};
  for (const s of stems) df[s] = stats.df[s] ?? 0;
  return { chunks: stats.chunks, total: stats.total, df };
}
