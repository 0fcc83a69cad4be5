import { VectorArena } from "./vector-arena";
import { type SignCodes, signCodesFor } from "./vector-codes";
import { dotRow, type ScanSource, SlotIndex } from "./vector-scan";

/**
 * The vectors of an object that has just woken, answered from SQLite's own row buffers instead
 * of a loaded arena (BENCHMARKS.md, "Issue 18, third pass"). A wake's full load reads the blocks
 * and then copies them into fresh WebAssembly memory, and that copy (page faults on 25 MB of
 * new memory at 100k vectors) cost about as much as the read. Here each block is copied into
 * one small scratch region that stays in cache, scanned there by the same SIMD kernel, and
 * dropped; the rows stay in the buffers SQLite returned. Slots are the blocks' order, as in
 * a full load, so nearestIn() over this source picks the same pool and answer as a loaded store.
 * The sign codes are derived block by block as the rows arrive, as a full load derives them, so
 * the compact pass over a large set picks the same candidates cold as warm.
 * Held for one call only: the store loads its arena after it (vector-store.ts).
 */
export class ColdVectors implements ScanSource {
  readonly dims: number;
  readonly count: number;
  readonly rowids: Int32Array;
  readonly scales: Float32Array;
  readonly slotOf = new SlotIndex();
  readonly codes: SignCodes | null;
  /** Each block's rows (unpadded, count x dims) and its first slot. */
  private readonly blocks: Int8Array[] = [];
  private readonly starts: number[] = [];
  private readonly scratch: VectorArena | null;
  /** Rows the scratch holds (the largest block). */
  private readonly largest: number;

  constructor(sql: SqlStorage, dims: number, total: number) {
    this.dims = dims;
    this.rowids = new Int32Array(total);
    this.scales = new Float32Array(total);
    this.codes = signCodesFor(dims);
    this.codes?.reserve(total);
    let count = 0;
    let largest = 0;
    for (const b of sql.exec<{ count: number; rowids: ArrayBuffer; scales: ArrayBuffer; data: ArrayBuffer }>(
      "SELECT count, rowids, scales, data FROM vector_blocks ORDER BY block",
    )) {
      this.rowids.set(new Int32Array(b.rowids, 0, b.count), count);
      this.scales.set(new Float32Array(b.scales, 0, b.count), count);
      const data = new Int8Array(b.data, 0, b.count * dims);
      this.blocks.push(data);
      this.codes?.setRows(count, data, b.count, this.scales, count);
      this.starts.push(count);
      count += b.count;
      largest = Math.max(largest, b.count);
    }
    this.count = count;
    this.slotOf.fill(this.rowids, count);
    this.largest = largest;
    this.scratch = dims > 0 && largest > 0 ? new VectorArena(dims) : null;
    this.scratch?.reserve(largest);
  }

  /** The block holding a slot (binary search over the blocks' first slots). */
  private blockOf(slot: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= slot) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  dotAll(query: Int8Array): Int32Array {
    const out = new Int32Array(this.count);
    const scratch = this.scratch;
    if (!scratch) return out;
    for (let b = 0; b < this.blocks.length; b++) {
      const n = this.blocks[b].length / this.dims;
      scratch.setRows(0, this.blocks[b], n);
      out.set(scratch.dotAll(query, n), this.starts[b]);
    }
    return out;
  }

  /**
   * dotAll() for the listed slots: their rows are copied into the scratch a batch at a time and
   * scanned there by the same kernel (on a wake the JIT has not compiled a JavaScript loop yet).
   * Integer products, so the same values as the arena's.
   */
  dotSome(query: Int8Array, slots: Int32Array): Int32Array {
    const out = new Int32Array(slots.length);
    const scratch = this.scratch;
    if (!scratch) return out;
    const batch = this.largest;
    for (let done = 0; done < slots.length; done += batch) {
      const n = Math.min(batch, slots.length - done);
      for (let i = 0; i < n; i++) scratch.setRow(i, this.row(slots[done + i]));
      out.set(scratch.dotAll(query, n), done);
    }
    return out;
  }

  row(slot: number): Int8Array {
    const b = this.blockOf(slot);
    const offset = (slot - this.starts[b]) * this.dims;
    return this.blocks[b].subarray(offset, offset + this.dims);
  }

  dot(slot: number, query: Float32Array): number {
    const b = this.blockOf(slot);
    return dotRow(this.blocks[b], (slot - this.starts[b]) * this.dims, this.dims, query);
  }
}
