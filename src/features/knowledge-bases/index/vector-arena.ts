import kernel from "./kernels/generated/int8-dot.wasm";
import { dotRow } from "./vector-scan";

/**
 * Int8 vectors in WebAssembly memory, scanned with the SIMD kernel of kernels/int8-dot.wat: an
 * exact scan of 100k x 256 dimensions costs about 2 ms where the same loop in JavaScript costs
 * about 37 ms (BENCHMARKS.md). Rows are zero-padded to `stride` bytes (a multiple of 32, the
 * kernel's step). Memory layout: [query: 64 KiB][rows: capacity x stride][scores: capacity x int32].
 * The arena stores rows only; which row holds which vector is its owner's business.
 */
interface KernelExports {
  memory: WebAssembly.Memory;
  dot_all(data: number, count: number, stride: number, query: number, out: number): void;
  dot_list(data: number, stride: number, query: number, list: number, n: number): void;
}

const PAGE = 65_536;
/** The query's region: the first page, so dimensions up to 65,536. */
const QUERY_BYTES = PAGE;
const LANE_BYTES = 32;
const MAX_ARENA_DIMS = QUERY_BYTES;

export class VectorArena {
  readonly dims: number;
  readonly stride: number;
  private readonly exports: KernelExports;
  private capacity = 0;
  private view: Int8Array;

  constructor(dims: number) {
    if (!Number.isInteger(dims) || dims < 1 || dims > MAX_ARENA_DIMS)
      throw new Error(`vectors must have 1 to ${MAX_ARENA_DIMS} dimensions`);
    this.dims = dims;
    this.stride = Math.ceil(dims / LANE_BYTES) * LANE_BYTES;
    this.exports = new WebAssembly.Instance(kernel, {}).exports as unknown as KernelExports;
    this.view = new Int8Array(this.exports.memory.buffer);
  }

  private get scoresOffset(): number {
    return QUERY_BYTES + this.capacity * this.stride;
  }

  /** Makes room for `n` rows, keeping the rows already written. */
  reserve(n: number): void {
    if (n <= this.capacity) return;
    // Half again while small, then 32k rows (8 MB at 256 dimensions) at a time: little slack in a 128 MB isolate.
    const capacity = Math.max(n, Math.min(Math.ceil(this.capacity * 1.5), this.capacity + 32_768), 1024);
    const needed = QUERY_BYTES + capacity * (this.stride + 4);
    const memory = this.exports.memory;
    if (needed > memory.buffer.byteLength) memory.grow(Math.ceil((needed - memory.buffer.byteLength) / PAGE));
    this.capacity = capacity;
    this.view = new Int8Array(memory.buffer);
  }

  /** The bytes of the arena, valid until the next reserve(). */
  get bytes(): Int8Array {
    return this.view;
  }

  rowOffset(slot: number): number {
    return QUERY_BYTES + slot * this.stride;
  }

  row(slot: number): Int8Array {
    const offset = this.rowOffset(slot);
    return this.view.subarray(offset, offset + this.dims);
  }

  setRow(slot: number, values: Int8Array): void {
    this.view.set(values.subarray(0, this.dims), this.rowOffset(slot));
  }

  /** Writes `n` consecutive rows from unpadded data (`n` x dims values). */
  setRows(slot: number, data: Int8Array, n: number): void {
    if (this.stride === this.dims) {
      this.view.set(data.subarray(0, n * this.dims), this.rowOffset(slot));
      return;
    }
    for (let i = 0; i < n; i++) this.setRow(slot + i, data.subarray(i * this.dims, (i + 1) * this.dims));
  }

  copyRow(from: number, to: number): void {
    this.view.copyWithin(this.rowOffset(to), this.rowOffset(from), this.rowOffset(from) + this.stride);
  }

  /**
   * Int32 dot products of an int8 query with the first `count` rows; the returned view is valid
   * until the next call or reserve().
   */
  dotAll(query: Int8Array, count: number): Int32Array {
    this.view.fill(0, 0, this.stride);
    this.view.set(query.subarray(0, this.dims), 0);
    const out = this.scoresOffset;
    this.exports.dot_all(QUERY_BYTES, count, this.stride, 0, out);
    return new Int32Array(this.exports.memory.buffer, out, count);
  }

  /**
   * dotAll() for some rows only (the candidates of the compact first pass, vector-codes.ts): the
   * int32 dot product of each listed slot's row; the view is valid until the next call or reserve().
   */
  dotSome(query: Int8Array, slots: Int32Array): Int32Array {
    this.view.fill(0, 0, this.stride);
    this.view.set(query.subarray(0, this.dims), 0);
    const out = this.scoresOffset;
    const list = new Int32Array(this.exports.memory.buffer, out, slots.length);
    list.set(slots);
    this.exports.dot_list(QUERY_BYTES, this.stride, 0, out, slots.length);
    return list;
  }

  /** The exact dot product of a float query with one row (int8 values, scale not applied). */
  dot(slot: number, query: Float32Array): number {
    return dotRow(this.view, this.rowOffset(slot), this.dims, query);
  }
}
