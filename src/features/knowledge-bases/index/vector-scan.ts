import type { SignCodes } from "./vector-codes";
import { quantize, TopK } from "./vector-index";

/** Below this share of the set, filtered candidates are scored one by one instead of scanning all. */
export const SPARSE_FILTER_SHARE = 1 / 8;

/** Slot of each rowid, in a typed array indexed by rowid (rowids are dense): 100k entries build in well under a millisecond. */
export class SlotIndex {
  /** slot + 1 by rowid; 0 means none. */
  private slots = new Int32Array(0);

  get(rowid: number): number | undefined {
    const v = rowid < this.slots.length ? this.slots[rowid] : 0;
    return v === 0 ? undefined : v - 1;
  }

  set(rowid: number, slot: number): void {
    if (rowid >= this.slots.length) {
      const grown = new Int32Array(Math.max(rowid + 1, Math.ceil(this.slots.length * 1.5), 1024));
      grown.set(this.slots);
      this.slots = grown;
    }
    this.slots[rowid] = slot + 1;
  }

  /**
   * Rebuilds the index from slot order in one pass over one array sized to the largest rowid: on
   * an object's wake this runs in a fresh isolate, where 100k set() calls (each checking growth)
   * cost 1-15 ms before the JIT catches up.
   */
  fill(rowids: Int32Array, count: number): void {
    let top = -1;
    for (let i = 0; i < count; i++) if (rowids[i] > top) top = rowids[i];
    const slots = new Int32Array(Math.max(top + 1, 1024));
    for (let i = 0; i < count; i++) slots[rowids[i]] = i + 1;
    this.slots = slots;
  }

  delete(rowid: number): void {
    if (rowid < this.slots.length) this.slots[rowid] = 0;
  }

  clear(): void {
    this.slots = new Int32Array(0);
  }
}

/**
 * The exact dot product of a float query with one stored int8 row (scale not applied). One
 * function for the arena and for rows still in SQLite's buffers (cold-vectors.ts), so both give
 * the same float to the bit: the same operations in the same order.
 */
export function dotRow(data: Int8Array, offset: number, dims: number, query: Float32Array): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let j = 0;
  for (; j + 3 < dims; j += 4) {
    s0 += query[j] * data[offset + j];
    s1 += query[j + 1] * data[offset + j + 1];
    s2 += query[j + 2] * data[offset + j + 2];
    s3 += query[j + 3] * data[offset + j + 3];
  }
  for (; j < dims; j++) s0 += query[j] * data[offset + j];
  return s0 + s1 + s2 + s3;
}

/**
 * From this many vectors in one object, a nearest search first ranks every vector by its 1-bit
 * sign code (vector-codes.ts) and int8-scores only the best of those: approximate, measured
 * recall in BENCHMARKS.md ("Issue 18, fourth pass"). Smaller sets are scanned exactly, as before.
 */
export interface Approximation {
  /** Sets of at least this many vectors take the compact pass. */
  from: number;
  /** Candidates kept per row of the int8 pool (topK * 2 + 64 for nearest; 164 for a top-10 hybrid query's depth of 50). */
  perPool: number;
  /** At least this many candidates, whatever the pool. */
  min: number;
}

/** 16 x the pool: the smallest multiple measured at recall >= 0.99 at top 10, 50 and 200 on the 100k bench corpus. */
export const APPROXIMATE: Approximation = { from: 20_000, perPool: 16, min: 1_024 };

/** What a nearest search reads: the vectors in slot order, wherever they are held. */
export interface ScanSource {
  readonly dims: number;
  readonly count: number;
  readonly rowids: Int32Array;
  readonly scales: Float32Array;
  readonly slotOf: SlotIndex;
  /** Int32 dot products of an int8 query with every row, in slot order (the SIMD kernel). */
  dotAll(query: Int8Array): Int32Array;
  /** The same products for the listed slots only, in the list's order. */
  dotSome(query: Int8Array, slots: Int32Array): Int32Array;
  /** Sign codes of the same rows, in slot order (null: none, every search scans all rows). */
  readonly codes: SignCodes | null;
  /** dotRow() of one slot's row. */
  dot(slot: number, query: Float32Array): number;
}

/**
 * The int8 first pass of a search whose pool holds `pool` rows: every row's int32 dot product with
 * the int8 query (slots null: raw[slot]), or, for a set of at least `approximate.from` rows with
 * codes, only the candidates of the compact pass (raw[i] is slots[i]'s). `mask` (by slot) limits
 * the candidates to allowed rows.
 */
export function int8Pass(
  source: ScanSource,
  q: Float32Array,
  pool: number,
  mask: Uint8Array | undefined,
  approximate: Approximation,
): { slots: Int32Array | null; raw: Int32Array } {
  const q8 = new Int8Array(source.dims);
  quantize(q, q8, 0);
  const want = Math.max(pool * approximate.perPool, approximate.min);
  if (source.codes && source.count >= approximate.from && want < source.count) {
    const slots = source.codes.candidates(q, source.count, want, mask);
    return { slots, raw: source.dotSome(q8, slots) };
  }
  return { slots: null, raw: source.dotAll(q8) };
}

/** A mask by slot of the `allowed` rowids. */
export function slotMask(source: ScanSource, allowed: Set<number>): Uint8Array {
  const mask = new Uint8Array(source.count);
  for (const rowid of allowed) {
    const slot = source.slotOf.get(rowid);
    if (slot !== undefined) mask[slot] = 1;
  }
  return mask;
}

/**
 * The `topK` rows whose vectors have the largest dot product with `query` (unit vectors: cosine),
 * among `allowed` rowids when given. The SIMD pass scores every vector against the query
 * quantised to int8; a pool of the best of those is then rescored exactly with the float query,
 * so scores equal the exact int8 dot product. The one implementation for a loaded store and a
 * cold one, so both choose the same pool and the same answer, ties included. From
 * `approximate.from` rows the SIMD pass covers only the compact pass's candidates (int8Pass).
 */
export function nearestIn(
  source: ScanSource,
  query: ArrayLike<number>,
  topK: number,
  allowed?: Set<number>,
  approximate = APPROXIMATE,
): { rowid: number; score: number }[] {
  const { count, scales, slotOf } = source;
  if (count === 0 || query.length !== source.dims) return [];
  const q = Float32Array.from(query);
  const best = new TopK(topK);
  const exact = (slot: number) => {
    const score = source.dot(slot, q) * scales[slot];
    if (score >= best.threshold) best.push(score, slot);
  };
  if (allowed && allowed.size < count * SPARSE_FILTER_SHARE) {
    for (const rowid of allowed) {
      const slot = slotOf.get(rowid);
      if (slot !== undefined) exact(slot);
    }
  } else {
    const mask = allowed ? slotMask(source, allowed) : undefined;
    const poolSize = Math.min(count, topK * 2 + 64);
    const { slots, raw } = int8Pass(source, q, poolSize, mask, approximate);
    const pool = new TopK(poolSize);
    // The pool's threshold only rises when it takes a vector: kept in a local, not read per slot.
    let threshold = -Infinity;
    for (let i = 0; i < raw.length; i++) {
      const slot = slots ? slots[i] : i;
      if (mask && mask[slot] === 0) continue;
      const approx = raw[i] * scales[slot];
      if (approx > threshold) {
        pool.push(approx, slot);
        threshold = pool.threshold;
      }
    }
    for (const { item } of pool.sorted()) exact(item);
  }
  return best.sorted().map((r) => ({ rowid: source.rowids[r.item], score: r.score }));
}

/**
 * VectorStore.scan over a source: with `pool`, the `pool` best allowed rows by the int8 first pass
 * (int8Pass, so approximate from `approximate.from` rows, as nearestIn), each with the int8 score
 * and the exact one; without, every allowed row scored exactly.
 */
export function scanIn(
  source: ScanSource,
  query: ArrayLike<number>,
  pool: number | undefined,
  allowed: Set<number> | undefined,
  approximate = APPROXIMATE,
): { rowid: number; approx: number; score: number }[] {
  if (source.count === 0 || query.length !== source.dims) return [];
  const q = Float32Array.from(query);
  const exact = (slot: number) => source.dot(slot, q) * source.scales[slot];
  if (pool === undefined) {
    const out: { rowid: number; approx: number; score: number }[] = [];
    for (const rowid of allowed ?? []) {
      const slot = source.slotOf.get(rowid);
      if (slot !== undefined) {
        const score = exact(slot);
        out.push({ rowid, approx: score, score });
      }
    }
    return out;
  }
  const size = Math.max(1, Math.min(source.count, pool));
  // The mask only narrows the compact pass's candidates; the loop below checks `allowed` itself.
  const mask = allowed && source.count >= approximate.from ? slotMask(source, allowed) : undefined;
  const { slots, raw } = int8Pass(source, q, size, mask, approximate);
  const best = new TopK(size);
  const { scales, rowids } = source;
  // As in nearestIn(): the pool's threshold only rises when it takes a row, so it is kept in a
  // local rather than read per slot (this loop runs over every vector of the shard).
  let threshold = -Infinity;
  for (let i = 0; i < raw.length; i++) {
    const slot = slots ? slots[i] : i;
    const approx = raw[i] * scales[slot];
    if (!(approx >= threshold)) continue;
    if (allowed && !allowed.has(rowids[slot])) continue;
    best.push(approx, rowids[slot]);
    threshold = best.threshold;
  }
  return best.sorted().map(({ item, score }) => {
    const slot = source.slotOf.get(item) ?? 0;
    return { rowid: item, approx: score, score: exact(slot) };
  });
}
