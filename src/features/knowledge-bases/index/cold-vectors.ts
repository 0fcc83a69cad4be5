import { VectorArena } from "./vector-arena";
import { dotRow, type ScanSource, SlotIndex } from "./vector-scan";

/**
 * The vectors of an object that has just woken, answered from SQLite's own row buffers instead
 * of a loaded arena (BENCHMARKS.md, "Issue 18, third pass"). A wake's full load reads the blocks
 * and then copies them into fresh WebAssembly memory, and that copy (page faults on 25 MB of
 * new memory at 100k vectors) cost about as much as the read. Here each block is copied into
 * one small scratch region that stays in cache, scanned there by the same SIMD kernel, and
 * dropped; the rows stay in the buffers SQLite returned. Slots are the blocks' order, as in
 * a full load, so nearestIn() over this source picks the same pool and answer as a loaded store.
 * No sign codes (vector-codes.ts): the call is always the exact scan, as before the compact pass.
 * Deriving them here measured slower on a wake (BENCHMARKS.md, "Issue 18, fourth pass": several
 * JavaScript passes over every vector before the JIT has compiled them), so above the compact
 * pass's threshold the first answer after a wake is the exact one, and later answers the
 * approximate one (they differ only where the measured recall is under 1).
 * Held for one call only: the store loads its arena after it (vector-store.ts).
 */
export class ColdVectors implements ScanSource {
  readonly dims: number;
  readonly count: number;
  readonly rowids: Int32Array;
  readonly scales: Float32Array;
  readonly slotOf = new SlotIndex();
  readonly codes = null;
  /** Each block's rows (unpadded, count x dims) and its first slot. */
  private readonly blocks: Int8Array[] = [];
  private readonly starts: number[] = [];
  private readonly scratch: VectorArena | null;

  constructor(sql: SqlStorage, dims: number, total: number) {
    this.dims = dims;
    this.rowids = new Int32Array(total);
    this.scales = new Float32Array(total);
    let count = 0;
    let largest = 0;
    for (const b of sql.exec<{ count: number; rowids: ArrayBuffer; scales: ArrayBuffer; data: ArrayBuffer }>(
      "SELECT count, rowids, scales, data FROM vector_blocks ORDER BY block",
    )) {
      this.rowids.set(new Int32Array(b.rowids, 0, b.count), count);
      this.scales.set(new Float32Array(b.scales, 0, b.count), count);
      const data = new Int8Array(b.data, 0, b.count * dims);
      this.blocks.push(data);
      this.starts.push(count);
      count += b.count;
      largest = Math.max(largest, b.count);
    }
    this.count = count;
    this.slotOf.fill(this.rowids, count);
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

  /** ScanSource's: unused here (no codes, so no candidates), kept correct by going through dotAll. */
  dotSome(query: Int8Array, slots: Int32Array): Int32Array {
    const all = this.dotAll(query);
    return Int32Array.from(slots, (slot) => all[slot]);
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
