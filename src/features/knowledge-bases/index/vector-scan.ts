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

/** What a nearest search reads: the vectors in slot order, wherever they are held. */
export interface ScanSource {
  readonly dims: number;
  readonly count: number;
  readonly rowids: Int32Array;
  readonly scales: Float32Array;
  readonly slotOf: SlotIndex;
  /** Int32 dot products of an int8 query with every row, in slot order (the SIMD kernel). */
  dotAll(query: Int8Array): Int32Array;
  /** dotRow() of one slot's row. */
  dot(slot: number, query: Float32Array): number;
}

/**
 * The `topK` rows whose vectors have the largest dot product with `query` (unit vectors: cosine),
 * among `allowed` rowids when given. The SIMD pass scores every vector against the query
 * quantised to int8; a pool of the best of those is then rescored exactly with the float query,
 * so scores equal the exact int8 dot product. The one implementation for a loaded store and a
 * cold one, so both choose the same pool and the same answer, ties included.
 */
export function nearestIn(
  source: ScanSource,
  query: ArrayLike<number>,
  topK: number,
  allowed?: Set<number>,
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
    let mask: Uint8Array | undefined;
    if (allowed) {
      mask = new Uint8Array(count);
      for (const rowid of allowed) {
        const slot = slotOf.get(rowid);
        if (slot !== undefined) mask[slot] = 1;
      }
    }
    const q8 = new Int8Array(source.dims);
    quantize(q, q8, 0);
    const raw = source.dotAll(q8);
    const pool = new TopK(Math.min(count, topK * 2 + 64));
    // The pool's threshold only rises when it takes a vector: kept in a local, not read per slot.
    let threshold = -Infinity;
    for (let slot = 0; slot < raw.length; slot++) {
      if (mask && mask[slot] === 0) continue;
      const approx = raw[slot] * scales[slot];
      if (approx > threshold) {
        pool.push(approx, slot);
        threshold = pool.threshold;
      }
    }
    for (const { item } of pool.sorted()) exact(item);
  }
  return best.sorted().map((r) => ({ rowid: source.rowids[r.item], score: r.score }));
}
