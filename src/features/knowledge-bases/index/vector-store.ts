import { VectorArena } from "./vector-arena";
import { quantize, TopK } from "./vector-index";

/** Vectors per stored row: one row of 512 x 512-d int8 vectors is ~256 KB, under the 2 MB row cap. */
const BLOCK = 512;
/** Below this share of the set, filtered candidates are scored one by one instead of scanning all. */
export const SPARSE_FILTER_SHARE = 1 / 8;

/** Slot of each rowid, in a typed array indexed by rowid (rowids are dense): 100k entries build in well under a millisecond. */
class SlotIndex {
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
 * The vectors of one knowledge base's Durable Object, keyed by the SQLite rowid of their chunk.
 * In SQLite they are int8 (one scale per vector), packed BLOCK per row of `vector_blocks`, so
 * after an eviction the whole set reloads in a few reads; in memory they live in a VectorArena and
 * every query is an exact scan (no approximate pre-ranking, so no recall is lost).
 */
export class VectorStore {
  private dimensions = 0;
  private count = 0;
  private rowids = new Int32Array(0);
  private scales = new Float32Array(0);
  private slotOf = new SlotIndex();
  private arena: VectorArena | null = null;
  private loaded = false;

  constructor(private readonly sql: SqlStorage) {}

  get size(): number {
    this.ensureLoaded();
    return this.count;
  }

  get dims(): number {
    this.ensureLoaded();
    return this.dimensions;
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
  }

  private ensureLoaded(): void {
    if (this.loaded) return;
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
    this.reserve(head.n ?? 0);
    // Block by block as the cursor reads them, not all rows first: each 128 KB buffer is dropped
    // once copied, instead of 25 MB of them (at 100k vectors) alive at once for the collector.
    for (const b of this.sql.exec<{ count: number; rowids: ArrayBuffer; scales: ArrayBuffer; data: ArrayBuffer }>(
      "SELECT count, rowids, scales, data FROM vector_blocks ORDER BY block",
    )) {
      this.rowids.set(new Int32Array(b.rowids, 0, b.count), this.count);
      this.scales.set(new Float32Array(b.scales, 0, b.count), this.count);
      this.arena?.setRows(this.count, new Int8Array(b.data, 0, b.count * this.dimensions), b.count);
      this.count += b.count;
    }
    this.slotOf.fill(this.rowids, this.count);
    this.loaded = true;
  }

  private reserve(n: number): void {
    this.arena?.reserve(n);
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
        this.slotOf.set(this.rowids[slot], slot);
      }
      this.slotOf.delete(rowid);
      this.count--;
      firstTouched = Math.min(firstTouched, slot);
    }
    if (firstTouched !== Infinity) this.persistBlocks(Math.min(firstTouched, this.count));
  }

  /** The stored (dequantised) values of a row's vector. */
  valuesOf(rowid: number): number[] | undefined {
    this.ensureLoaded();
    const slot = this.slotOf.get(rowid);
    if (slot === undefined || !this.arena) return undefined;
    const scale = this.scales[slot];
    return Array.from(this.arena.row(slot), (v) => v * scale);
  }

  /**
   * The `topK` rows whose vectors have the largest dot product with `query` (unit vectors: cosine),
   * among `allowed` rowids when given. The SIMD pass scores every vector against the query
   * quantised to int8; a pool of the best of those is then rescored exactly with the float query,
   * so scores equal the exact int8 dot product.
   */
  nearest(query: ArrayLike<number>, topK: number, allowed?: Set<number>): { rowid: number; score: number }[] {
    this.ensureLoaded();
    const arena = this.arena;
    if (!arena || this.count === 0 || query.length !== this.dimensions) return [];
    const q = Float32Array.from(query);
    const best = new TopK(topK);
    const exact = (slot: number) => {
      const score = arena.dot(slot, q) * this.scales[slot];
      if (score >= best.threshold) best.push(score, slot);
    };
    if (allowed && allowed.size < this.count * SPARSE_FILTER_SHARE) {
      for (const rowid of allowed) {
        const slot = this.slotOf.get(rowid);
        if (slot !== undefined) exact(slot);
      }
    } else {
      let mask: Uint8Array | undefined;
      if (allowed) {
        mask = new Uint8Array(this.count);
        for (const rowid of allowed) {
          const slot = this.slotOf.get(rowid);
          if (slot !== undefined) mask[slot] = 1;
        }
      }
      const q8 = new Int8Array(this.dimensions);
      quantize(q, q8, 0);
      const raw = arena.dotAll(q8, this.count);
      const pool = new TopK(Math.min(this.count, topK * 2 + 64));
      const scales = this.scales;
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
    return best.sorted().map((r) => ({ rowid: this.rowids[r.item], score: r.score }));
  }

  /**
   * This shard's part of a nearest search over a sharded knowledge base (shard-stages.ts): with
   * `pool`, its `pool` best rows by the int8 scan, each with that scan's score and the exact one,
   * so the caller picks the same pool and the same top as nearest() over one index; without,
   * every allowed row scored exactly (nearest()'s sparse-filter path).
   */
  scan(
    query: ArrayLike<number>,
    pool: number | undefined,
    allowed: Set<number> | undefined,
  ): { rowid: number; approx: number; score: number }[] {
    this.ensureLoaded();
    const arena = this.arena;
    if (!arena || this.count === 0 || query.length !== this.dimensions) return [];
    const q = Float32Array.from(query);
    const exact = (slot: number) => arena.dot(slot, q) * this.scales[slot];
    if (pool === undefined) {
      const out: { rowid: number; approx: number; score: number }[] = [];
      for (const rowid of allowed ?? []) {
        const slot = this.slotOf.get(rowid);
        if (slot !== undefined) {
          const score = exact(slot);
          out.push({ rowid, approx: score, score });
        }
      }
      return out;
    }
    const q8 = new Int8Array(this.dimensions);
    quantize(q, q8, 0);
    const raw = arena.dotAll(q8, this.count);
    const best = new TopK(Math.max(1, Math.min(this.count, pool)));
    const { scales, rowids } = this;
    // As in nearest(): the pool's threshold only rises when it takes a row, so it is kept in a
    // local rather than read per slot (this loop runs over every vector of the shard).
    let threshold = -Infinity;
    for (let slot = 0; slot < raw.length; slot++) {
      const approx = raw[slot] * scales[slot];
      if (!(approx >= threshold)) continue;
      const rowid = rowids[slot];
      if (allowed && !allowed.has(rowid)) continue;
      best.push(approx, rowid);
      threshold = best.threshold;
    }
    return best.sorted().map(({ item, score }) => {
      const slot = this.slotOf.get(item) ?? 0;
      return { rowid: item, approx: score, score: exact(slot) };
    });
  }
}
