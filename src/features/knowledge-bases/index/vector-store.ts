import { VectorArena } from "./vector-arena";
import { quantize } from "./vector-index";
import { ColdVectors } from "./cold-vectors";
import { type SignCodes, signCodesFor } from "./vector-codes";
import { APPROXIMATE, type Approximation, nearestIn, type ScanSource, scanIn, SlotIndex } from "./vector-scan";

export { SPARSE_FILTER_SHARE } from "./vector-scan";

/** Vectors per stored row: one row of 512 x 512-d int8 vectors is ~256 KB, under the 2 MB row cap. */
const BLOCK = 512;
/**
 * Largest set (int8 bytes) answered cold on a wake (cold-vectors.ts): the cold call holds SQLite's
 * buffers and the load after it allocates the arena, so up to twice this is briefly alive in a
 * 128 MB isolate. Larger sets load first, as before; the answers are the same either way.
 */
const COLD_MAX_BYTES = 40 * 1024 * 1024;
/**
 * How long after a cold call the arena is loaded. Not at once: on `npm start` the object shares
 * one isolate (one thread) with the Worker, and with the load queued right behind the call the
 * first queries measured slower than before, as if it ran before the Worker sent the answer.
 * Reads before then use the same buffers; a write loads the arena at once.
 */
const LOAD_AFTER_COLD_MS = 250;
/**
 * The vectors of one knowledge base's Durable Object, keyed by the SQLite rowid of their chunk.
 * In SQLite they are int8 (one scale per vector), packed BLOCK per row of `vector_blocks`, so
 * after an eviction the whole set reloads in a few reads; in memory they live in a VectorArena,
 * with their 1-bit sign codes beside them (SignCodes, derived, not stored). Below
 * `approximate.from` vectors every query is an exact int8 scan; from it, the codes choose the rows
 * the int8 scan scores (vector-scan.ts, int8Pass; recall measured in BENCHMARKS.md).
 */
export class VectorStore {
  private dimensions = 0;
  private count = 0;
  private rowids = new Int32Array(0);
  private scales = new Float32Array(0);
  private slotOf = new SlotIndex();
  private arena: VectorArena | null = null;
  private codes: SignCodes | null = null;
  private loaded = false;
  /** The call that woke the object reads its vectors here, not into the arena (cold-vectors.ts). */
  private cold: ColdVectors | null = null;

  /** `approximate`: changed only by tests (vector-scan.ts, APPROXIMATE). */
  constructor(
    private readonly sql: SqlStorage,
    private readonly approximate: Approximation = APPROXIMATE,
  ) {}

  get size(): number {
    if (!this.loaded && this.cold) return this.cold.count;
    this.ensureLoaded();
    return this.count;
  }

  get dims(): number {
    if (!this.loaded && this.cold) return this.cold.dims;
    this.ensureLoaded();
    return this.dimensions;
  }

  /** Whether the vectors are in the arena (false before the first use after a wake, and while a cold call reads them from SQLite). */
  get inArena(): boolean {
    return this.loaded;
  }

  /** Forgets what is in memory (as an eviction would); the next use reloads from SQLite. */
  unload(): void {
    this.loaded = false;
    this.count = 0;
    this.dimensions = 0;
    this.rowids = new Int32Array(0);
    this.scales = new Float32Array(0);
    this.slotOf.clear();
    this.arena = null;
    this.codes = null;
    this.cold = null;
  }

  private ensureLoaded(): void {
    if (this.loaded) return;
    this.cold = null;
    // The wake path (BENCHMARKS.md, issue 18, third pass): one statement for the set's shape, then
    // every array sized once, so nothing is grown or copied twice while 25 MB stream in.
    const head = this.sql
      .exec<{ dims: string | null; n: number | null }>(
        "SELECT (SELECT value FROM meta WHERE key = 'dims') AS dims, (SELECT sum(count) FROM vector_blocks) AS n",
      )
      .one();
    this.dimensions = head.dims ? Number(head.dims) : 0;
    this.count = 0;
    this.arena = this.dimensions > 0 ? new VectorArena(this.dimensions) : null;
    this.codes = signCodesFor(this.dimensions);
    this.reserve(head.n ?? 0);
    // Block by block as the cursor reads them, not all rows first: each 128 KB buffer is dropped
    // once copied, instead of 25 MB of them (at 100k vectors) alive at once for the collector.
    for (const b of this.sql.exec<{ count: number; rowids: ArrayBuffer; scales: ArrayBuffer; data: ArrayBuffer }>(
      "SELECT count, rowids, scales, data FROM vector_blocks ORDER BY block",
    )) {
      this.rowids.set(new Int32Array(b.rowids, 0, b.count), this.count);
      this.scales.set(new Float32Array(b.scales, 0, b.count), this.count);
      const data = new Int8Array(b.data, 0, b.count * this.dimensions);
      this.arena?.setRows(this.count, data, b.count);
      this.codes?.setRows(this.count, data, b.count, this.scales, this.count);
      this.count += b.count;
    }
    this.slotOf.fill(this.rowids, this.count);
    this.loaded = true;
  }

  private reserve(n: number): void {
    this.arena?.reserve(n);
    this.codes?.reserve(n);
    if (n <= this.rowids.length) return;
    const capacity = Math.max(n, Math.min(Math.ceil(this.rowids.length * 1.5), this.rowids.length + 32_768), 1024);
    const rowids = new Int32Array(capacity);
    rowids.set(this.rowids.subarray(0, this.count));
    const scales = new Float32Array(capacity);
    scales.set(this.scales.subarray(0, this.count));
    this.rowids = rowids;
    this.scales = scales;
  }

  private persistBlocks(fromSlot: number): void {
    const dims = this.dimensions;
    const blocks = Math.ceil(this.count / BLOCK);
    for (let b = Math.floor(fromSlot / BLOCK); b < blocks; b++) {
      const start = b * BLOCK;
      const end = Math.min(this.count, start + BLOCK);
      const data = new Int8Array((end - start) * dims);
      for (let slot = start; slot < end; slot++) if (this.arena) data.set(this.arena.row(slot), (slot - start) * dims);
      this.sql.exec(
        "INSERT OR REPLACE INTO vector_blocks (block, count, rowids, scales, data) VALUES (?, ?, ?, ?, ?)",
        b,
        end - start,
        this.rowids.slice(start, end).buffer,
        this.scales.slice(start, end).buffer,
        data.buffer,
      );
    }
    this.sql.exec("DELETE FROM vector_blocks WHERE block >= ?", blocks);
  }

  private arenaFor(dims: number): VectorArena {
    if (this.arena && this.dimensions === dims) return this.arena;
    if (this.dimensions !== 0 && this.count > 0)
      throw new Error(`vector has ${dims} dimensions; this index holds ${this.dimensions}`);
    this.dimensions = dims;
    this.arena = new VectorArena(dims);
    this.arena.reserve(this.rowids.length);
    this.codes = signCodesFor(dims);
    this.codes?.reserve(this.rowids.length);
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('dims', ?)", String(dims));
    return this.arena;
  }

  /** Adds or replaces the vectors of some rows (inside the caller's transaction). */
  write(entries: { rowid: number; values: ArrayLike<number> }[]): void {
    if (entries.length === 0) return;
    this.ensureLoaded();
    const arena = this.arenaFor(entries[0].values.length);
    this.reserve(this.count + entries.length);
    const quantized = new Int8Array(this.dimensions);
    let firstTouched = this.count;
    for (const { rowid, values } of entries) {
      if (values.length !== this.dimensions)
        throw new Error(`vector has ${values.length} dimensions; this index holds ${this.dimensions}`);
      let slot = this.slotOf.get(rowid);
      if (slot === undefined) {
        slot = this.count++;
        this.slotOf.set(rowid, slot);
        this.rowids[slot] = rowid;
      }
      firstTouched = Math.min(firstTouched, slot);
      this.scales[slot] = quantize(values, quantized, 0);
      arena.setRow(slot, quantized);
      this.codes?.setRows(slot, quantized, 1, this.scales, slot);
    }
    this.persistBlocks(firstTouched);
  }

  /** Removes the vectors of some rows; a swap with the last slot keeps the set dense. */
  remove(rowids: number[]): void {
    this.ensureLoaded();
    let firstTouched = Infinity;
    for (const rowid of rowids) {
      const slot = this.slotOf.get(rowid);
      if (slot === undefined) continue;
      const last = this.count - 1;
      if (slot !== last) {
        this.rowids[slot] = this.rowids[last];
        this.scales[slot] = this.scales[last];
        this.arena?.copyRow(last, slot);
        this.codes?.copyRow(last, slot);
        this.slotOf.set(this.rowids[slot], slot);
      }
      this.slotOf.delete(rowid);
      this.count--;
      firstTouched = Math.min(firstTouched, slot);
    }
    if (firstTouched !== Infinity) this.persistBlocks(Math.min(firstTouched, this.count));
  }

  /**
   * What the read paths scan: the loaded arena, or on the first call after a wake the blocks as
   * SQLite returns them (ColdVectors), the arena then being loaded once that call is over (a timer,
   * so after the answer is sent; reads until then use the same buffers, a write loads it at once
   * and drops them, so they never go stale). Null when empty.
   */
  private source(): ScanSource | null {
    if (!this.loaded && !this.cold) {
      const head = this.sql
        .exec<{ dims: string | null; n: number | null }>(
          "SELECT (SELECT value FROM meta WHERE key = 'dims') AS dims, (SELECT sum(count) FROM vector_blocks) AS n",
        )
        .one();
      const dims = head.dims ? Number(head.dims) : 0;
      const n = head.n ?? 0;
      if (dims > 0 && n > 0 && n * dims <= COLD_MAX_BYTES) {
        this.cold = new ColdVectors(this.sql, dims, n);
        setTimeout(() => {
          // Only ahead of time: if this fails (the object is being reset or evicted), the next use loads.
          try {
            this.ensureLoaded();
          } catch {}
        }, LOAD_AFTER_COLD_MS);
      }
    }
    if (!this.loaded && this.cold) return this.cold;
    this.ensureLoaded();
    const arena = this.arena;
    if (!arena || this.count === 0) return null;
    return {
      dims: this.dimensions,
      count: this.count,
      rowids: this.rowids,
      scales: this.scales,
      slotOf: this.slotOf,
      dotAll: (q8) => arena.dotAll(q8, this.count),
      dotSome: (q8, slots) => arena.dotSome(q8, slots),
      codes: this.codes,
      dot: (slot, q) => arena.dot(slot, q),
    };
  }

  /** The stored (dequantised) values of a row's vector. */
  valuesOf(rowid: number): number[] | undefined {
    const source = this.source();
    const slot = source?.slotOf.get(rowid);
    if (!source || slot === undefined) return undefined;
    const scale = source.scales[slot];
    const row = this.cold && source === this.cold ? this.cold.row(slot) : this.arena?.row(slot);
    return row ? Array.from(row, (v) => v * scale) : undefined;
  }

  /**
   * Some rows' int8 values and scales as the scan holds them (rows without a vector left out), so
   * a sharded query's coordinator can score them with the same dotRow() a shard would use
   * (sharded-codes.ts) and skip a round to every shard.
   */
  codesOf(rowids: ArrayLike<number>): { rowids: Int32Array; scales: Float32Array; codes: Int8Array; dims: number } {
    const source = this.source();
    const dims = source?.dims ?? 0;
    const found: number[] = [];
    const scales: number[] = [];
    const rows: Int8Array[] = [];
    for (let i = 0; i < rowids.length && source; i++) {
      const slot = source.slotOf.get(rowids[i]);
      const row =
        slot === undefined
          ? undefined
          : this.cold && source === this.cold
            ? this.cold.row(slot)
            : this.arena?.row(slot);
      if (slot === undefined || !row) continue;
      found.push(rowids[i]);
      scales.push(source.scales[slot]);
      rows.push(row);
    }
    const codes = new Int8Array(found.length * dims);
    rows.forEach((row, i) => codes.set(row, i * dims));
    return { rowids: Int32Array.from(found), scales: Float32Array.from(scales), codes, dims };
  }

  /** The `topK` nearest rows to `query` among `allowed` (vector-scan.ts, nearestIn). */
  nearest(query: ArrayLike<number>, topK: number, allowed?: Set<number>): { rowid: number; score: number }[] {
    const source = this.source();
    return source ? nearestIn(source, query, topK, allowed, this.approximate) : [];
  }

  /**
   * This shard's part of a nearest search over a sharded knowledge base (shard-stages.ts): with
   * `pool`, its `pool` best rows by the int8 scan, each with that scan's score and the exact one,
   * so the caller picks the same pool and the same top as nearest() over one index; without,
   * every allowed row scored exactly (nearest()'s sparse-filter path). vector-scan.ts, scanIn.
   */
  scan(
    query: ArrayLike<number>,
    pool: number | undefined,
    allowed: Set<number> | undefined,
  ): { rowid: number; approx: number; score: number }[] {
    const source = this.source();
    return source ? scanIn(source, query, pool, allowed, this.approximate) : [];
  }
}
