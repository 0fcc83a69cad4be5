import kernel from "./kernels/generated/int8-dot.wasm";

/**
 * 1-bit sign codes of a store's int8 rows, the compact first pass of a nearest search over a large
 * set (BENCHMARKS.md, "Issue 18, fourth pass"): 32 bytes a vector at 256 dimensions instead of
 * 256. Derived in memory from the int8 rows (nothing stored), so old objects need nothing migrated.
 *
 * The estimate is asymmetric (as RaBitQ's): the query keeps 4 bits a dimension, a row is reduced
 * to its signs s, and <q, x> ~ <q, s> * |x|^2 / |x|_1 (the factor makes it exact for a row whose
 * values all have one magnitude). <q, s> is read 16 vectors at a time from tables of the query
 * (the "fast scan" layout, kernels/int8-dot.wat, fastscan): a popcount per bit plane measured as
 * slow as the int8 scan itself on x64, the table look-ups about a fifth of it. The estimate only
 * ranks candidates: the int8 scan scores them, and the pool is rescored exactly, as before.
 *
 * Memory (one instance of the kernel per store): [tables: 64 KiB][scratch rows][row stats]
 * [codes: capacity x codeBytes, blocks of 16][negatives: capacity x f32][factors: capacity x f32]
 * [sums: capacity x u16][estimates: capacity x f32]; negatives (the count of negative values)
 * and factors are per row, moved up when the codes grow.
 */
interface CodeKernel {
  memory: WebAssembly.Memory;
  encode(rows: number, n: number, stride: number, codes: number, first: number, codeBytes: number, stats: number): void;
  fastscan(codes: number, blocks: number, codeBytes: number, luts: number, out: number): void;
  finish(
    sums: number,
    negatives: number,
    factors: number,
    out: number,
    n: number,
    k: number,
    l: number,
    m: number,
  ): void;
  count_at_least(estimates: number, n: number, threshold: number): number;
  compact_at_least(estimates: number, n: number, threshold: number): number;
}

const PAGE = 65_536;
const TABLES_BYTES = PAGE;
const LANE_BYTES = 32;
/** Rows encoded per kernel call: at most 256 KB of scratch, whatever the dimensions. */
const SCRATCH_BYTES = 256 * 1024;
/** Sums are u16 (at most 15 x dims): codes only up to this many dimensions. */
export const MAX_CODE_DIMS = 4096;

/** Sign codes for rows of `dims` dimensions, or null past MAX_CODE_DIMS (those sets are always scanned exactly). */
export function signCodesFor(dims: number): SignCodes | null {
  return dims > 0 && dims <= MAX_CODE_DIMS ? new SignCodes(dims) : null;
}

export class SignCodes {
  readonly dims: number;
  /** The int8 row stride the kernel reads (as the arena's: zero-padded to 32 bytes). */
  private readonly stride: number;
  /** Bytes of one code (dims / 8, rounded up to the stride's). */
  readonly codeBytes: number;
  private readonly scratchRows: number;
  private readonly exports: CodeKernel;
  private capacity = 0;
  private bytes = new Uint8Array(0);
  private ints = new Int32Array(0);
  private floats = new Float32Array(0);

  constructor(dims: number) {
    if (!Number.isInteger(dims) || dims < 1 || dims > MAX_CODE_DIMS)
      throw new Error(`sign codes take 1 to ${MAX_CODE_DIMS} dimensions`);
    this.dims = dims;
    this.stride = Math.ceil(dims / LANE_BYTES) * LANE_BYTES;
    this.codeBytes = this.stride / 8;
    this.scratchRows = Math.max(1, Math.floor(SCRATCH_BYTES / this.stride));
    this.exports = new WebAssembly.Instance(kernel, {}).exports as unknown as CodeKernel;
    this.reserve(0);
  }

  private get scratchOffset(): number {
    return TABLES_BYTES;
  }
  private get statsOffset(): number {
    return this.scratchOffset + this.scratchRows * this.stride;
  }
  private get codesOffset(): number {
    return this.statsOffset + this.scratchRows * 12;
  }
  private negativesOffset(capacity = this.capacity): number {
    return this.codesOffset + capacity * this.codeBytes;
  }
  private factorsOffset(capacity = this.capacity): number {
    return this.negativesOffset(capacity) + capacity * 4;
  }
  private get sumsOffset(): number {
    return this.factorsOffset() + this.capacity * 4;
  }
  private get estimatesOffset(): number {
    return this.sumsOffset + this.capacity * 2;
  }

  /** Makes room for `n` codes, keeping those written (the sums after them are scratch). */
  reserve(n: number): void {
    if (n <= this.capacity && this.bytes.length > 0) return;
    const grown = Math.max(n, Math.min(Math.ceil(this.capacity * 1.5), this.capacity + 32_768), 1024);
    const capacity = Math.ceil(grown / 16) * 16;
    const memory = this.exports.memory;
    const needed = this.codesOffset + capacity * (this.codeBytes + 14);
    if (needed > memory.buffer.byteLength) memory.grow(Math.ceil((needed - memory.buffer.byteLength) / PAGE));
    this.bytes = new Uint8Array(memory.buffer);
    this.ints = new Int32Array(memory.buffer);
    this.floats = new Float32Array(memory.buffer);
    // Factors first: both regions move up, and the new negatives may cover the old factors.
    const oldFactors = this.factorsOffset();
    const oldNegatives = this.negativesOffset();
    this.bytes.copyWithin(this.factorsOffset(capacity), oldFactors, oldFactors + this.capacity * 4);
    this.bytes.copyWithin(this.negativesOffset(capacity), oldNegatives, oldNegatives + this.capacity * 4);
    this.capacity = capacity;
  }

  /** Encodes `n` consecutive rows from unpadded int8 data, with their scales (value = q * scale). */
  setRows(slot: number, data: Int8Array, n: number, scales: ArrayLike<number>, scalesFrom = 0): void {
    const { dims, stride } = this;
    const scratch = this.scratchOffset;
    for (let done = 0; done < n; done += this.scratchRows) {
      const k = Math.min(this.scratchRows, n - done);
      // Padding bytes of the scratch are never written, so they stay zero (sign bit 0).
      for (let i = 0; i < k; i++) {
        const row = data.subarray((done + i) * dims, (done + i + 1) * dims);
        this.bytes.set(new Uint8Array(row.buffer, row.byteOffset, dims), scratch + i * stride);
      }
      const first = slot + done;
      this.exports.encode(scratch, k, stride, this.codesOffset, first, this.codeBytes, this.statsOffset);
      const stats = this.statsOffset >> 2;
      const factors = this.factorsOffset() >> 2;
      const negatives = this.negativesOffset() >> 2;
      for (let i = 0; i < k; i++) {
        const squares = this.ints[stats + 3 * i];
        const absolute = this.ints[stats + 3 * i + 1];
        this.floats[factors + first + i] = absolute > 0 ? (scales[scalesFrom + done + i] * squares) / absolute : 0;
        this.floats[negatives + first + i] = this.ints[stats + 3 * i + 2];
      }
    }
  }

  private at(slot: number): number {
    return this.codesOffset + (slot >> 4) * this.codeBytes * 16 + (slot & 15);
  }

  copyRow(from: number, to: number): void {
    const a = this.at(from);
    const b = this.at(to);
    for (let i = 0; i < this.codeBytes; i++) this.bytes[b + i * 16] = this.bytes[a + i * 16];
    const factors = this.factorsOffset() >> 2;
    const negatives = this.negativesOffset() >> 2;
    this.floats[factors + to] = this.floats[factors + from];
    this.floats[negatives + to] = this.floats[negatives + from];
  }

  /**
   * The compact pass's estimate of the dot product of `query` (floats) with each of the first
   * `count` rows; the view is valid until the next call or reserve().
   */
  estimate(query: Float32Array, count: number): Float32Array {
    const { dims, codeBytes } = this;
    let lo = Infinity;
    let hi = -Infinity;
    for (let j = 0; j < dims; j++) {
      lo = Math.min(lo, query[j]);
      hi = Math.max(hi, query[j]);
    }
    const delta = hi > lo ? (hi - lo) / 15 : 1;
    const u = new Uint8Array(codeBytes * 8);
    let total = 0;
    for (let j = 0; j < dims; j++) {
      u[j] = Math.min(15, Math.max(0, Math.round((query[j] - lo) / delta)));
      total += u[j];
    }
    // One table of 16 sums per 4 dimensions (a nibble of the code).
    const tables = this.bytes;
    for (let nibble = 0; nibble < codeBytes * 2; nibble++) {
      const d = nibble * 4;
      for (let pattern = 0; pattern < 16; pattern++)
        tables[nibble * 16 + pattern] =
          (pattern & 1 ? u[d] : 0) +
          (pattern & 2 ? u[d + 1] : 0) +
          (pattern & 4 ? u[d + 2] : 0) +
          (pattern & 8 ? u[d + 3] : 0);
    }
    const sums = this.sumsOffset;
    this.exports.fastscan(this.codesOffset, Math.ceil(count / 16), codeBytes, 0, sums);
    // <q, s> with s = +1 where the value is >= 0, -1 where negative (P of them, u summing to A):
    // q_j ~ lo + delta * u_j, so <q, s> ~ lo * (d - 2P) + delta * (U - 2A) = k + l * P + m * A.
    const out = this.estimatesOffset;
    const n = Math.ceil(count / 4) * 4;
    this.exports.finish(
      sums,
      this.negativesOffset(),
      this.factorsOffset(),
      out,
      n,
      lo * dims + delta * total,
      -2 * lo,
      -2 * delta,
    );
    return new Float32Array(this.exports.memory.buffer, out, count);
  }

  /**
   * bestSlots() of the estimates of `query` over the first `count` rows: the same slots. Without a
   * mask its two passes over every estimate (count the slots at a threshold, then take them) run
   * in the kernel, the estimates being overwritten by the slots they keep.
   */
  candidates(query: Float32Array, count: number, want: number, mask?: Uint8Array): Int32Array {
    const estimates = this.estimate(query, count);
    if (mask) return bestSlots(estimates, want, mask);
    const at = this.estimatesOffset;
    return bestSlots(estimates, want, undefined, {
      count: (threshold) => this.exports.count_at_least(at, count, threshold),
      take: (threshold) =>
        new Int32Array(this.exports.memory.buffer, at, this.exports.compact_at_least(at, count, threshold)).slice(),
    });
  }
}

/** bestSlots' two passes over every estimate when they run elsewhere (SignCodes.candidates): counting, then taking (in slot order). */
export interface SlotPasses {
  count(threshold: number): number;
  take(threshold: number): Int32Array;
}

/** bestSlots' scratch buffer, shared by every store of the isolate (never handed out: each answer is a copy). */
let slotScratch = new Int32Array(0);

/**
 * The slots of at least `want` of the best estimates among those `mask` allows (all when absent),
 * in slot order: a threshold from a fixed sample of the estimates (every n/2048-th), lowered
 * until `want` pass it; every slot at or above it is kept, so the result depends only on the
 * estimates, never on the order of ties (a cold and a warm store pick the same candidates). The
 * answer is the caller's own array (the n-slot scratch buffer behind it is reused).
 */
export function bestSlots(estimates: Float32Array, want: number, mask?: Uint8Array, passes?: SlotPasses): Int32Array {
  const n = estimates.length;
  const step = Math.max(1, Math.floor(n / 2048));
  const sample = new Float64Array(Math.ceil(n / step));
  let m = 0;
  for (let i = 0; i < n; i += step) if (mask === undefined || mask[i] !== 0) sample[m++] = estimates[i];
  // Ascending (typed arrays sort numerically); rank r from the top is sample[m - 1 - r].
  const sorted = sample.subarray(0, m).sort();
  // A quarter more than `want`'s share of the sample, so one pass over all usually suffices.
  let rank = Math.ceil((want / step) * 1.25) + 8;
  for (;;) {
    const threshold = rank < m ? sorted[m - 1 - rank] : Number.NEGATIVE_INFINITY;
    // The threshold is one of the float32 estimates (or -Infinity), so a float32 comparison in the
    // kernel keeps exactly the slots this loop would.
    if (passes && mask === undefined) {
      if (threshold === Number.NEGATIVE_INFINITY || passes.count(threshold) >= want) return passes.take(threshold);
      rank *= 2;
      continue;
    }
    // Reused: a fresh n-slot array a query (400 KB at 100k vectors) cost an allocation and the
    // collections it brought on, for ~3% of it used.
    if (slotScratch.length < n) slotScratch = new Int32Array(n);
    const out = slotScratch;
    let k = 0;
    if (mask === undefined) {
      for (let i = 0; i < n; i++) if (estimates[i] >= threshold) out[k++] = i;
    } else for (let i = 0; i < n; i++) if (estimates[i] >= threshold && mask[i] !== 0) out[k++] = i;
    // A copy of the k slots (~3% of n): the scratch buffer is never handed out, so no caller can
    // see it overwritten by a later search.
    if (k >= want || threshold === Number.NEGATIVE_INFINITY) return out.slice(0, k);
    rank *= 2;
  }
}
