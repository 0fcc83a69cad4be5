import type { Scored } from "./hybrid-search";
import type { ExtrasResult, StageKind, StageResults, StatsResult } from "./shard-stages";

/**
 * How a shard's step answers cross the RPC boundary: candidate lists (the vector pool, BM25 and
 * nearest hits, a few hundred entries from every shard on every step) as typed arrays, which are
 * copied in one piece, where an array of small objects is serialised and rebuilt entry by entry
 * on both sides. Float64Array keeps every rowid and score exactly, so the Worker unpacks the same
 * lists the shard packed (shard-scatter.ts) and nothing downstream changes.
 */
export interface PackedHits {
  ids: Float64Array;
  scores: Float64Array;
}

export interface PackedPool {
  rowids: Float64Array;
  approx: Float64Array;
  scores: Float64Array;
}

type Pool = StageResults["vector"];

export type WireResults = Omit<StageResults, "stats" | "keyword" | "vector" | "nearestAmong"> & {
  stats: Omit<StatsResult, "nearest"> & { nearest?: PackedPool };
  keyword: { hits: PackedHits; extras: ExtrasResult };
  vector: PackedPool;
  nearestAmong: { hits: PackedHits; extras: ExtrasResult };
};

function packHits(hits: Scored<number>[]): PackedHits {
  const ids = new Float64Array(hits.length);
  const scores = new Float64Array(hits.length);
  hits.forEach((h, i) => {
    ids[i] = h.id;
    scores[i] = h.score;
  });
  return { ids, scores };
}

function unpackHits(p: PackedHits): Scored<number>[] {
  return Array.from(p.ids, (id, i) => ({ id, score: p.scores[i] }));
}

function packPool(pool: Pool): PackedPool {
  const out = {
    rowids: new Float64Array(pool.length),
    approx: new Float64Array(pool.length),
    scores: new Float64Array(pool.length),
  };
  pool.forEach((c, i) => {
    out.rowids[i] = c.rowid;
    out.approx[i] = c.approx;
    out.scores[i] = c.score;
  });
  return out;
}

function unpackPool(p: PackedPool): Pool {
  return Array.from(p.rowids, (rowid, i) => ({ rowid, approx: p.approx[i], score: p.scores[i] }));
}

/** A step's answer as the shard sends it. */
export function toWire<K extends StageKind>(kind: K, result: StageResults[K]): WireResults[K] {
  switch (kind) {
    case "stats": {
      const { nearest, ...rest } = result as StatsResult;
      return (nearest ? { ...rest, nearest: packPool(nearest) } : rest) as WireResults[K];
    }
    case "keyword":
    case "nearestAmong": {
      const r = result as StageResults["keyword"];
      return { hits: packHits(r.hits), extras: r.extras } as WireResults[K];
    }
    case "vector":
      return packPool(result as Pool) as WireResults[K];
    default:
      // The other steps' answers cross as they are.
      return result as unknown as WireResults[K];
  }
}

/** A step's answer as the Worker reads it (the shard's own lists, rebuilt). */
export function fromWire<K extends StageKind>(kind: K, wire: WireResults[K]): StageResults[K] {
  switch (kind) {
    case "stats": {
      const { nearest, ...rest } = wire as WireResults["stats"];
      return (nearest ? { ...rest, nearest: unpackPool(nearest) } : rest) as StageResults[K];
    }
    case "keyword":
    case "nearestAmong": {
      const w = wire as WireResults["keyword"];
      return { hits: unpackHits(w.hits), extras: w.extras } as StageResults[K];
    }
    case "vector":
      return unpackPool(wire as PackedPool) as StageResults[K];
    default:
      return wire as unknown as StageResults[K];
  }
}
