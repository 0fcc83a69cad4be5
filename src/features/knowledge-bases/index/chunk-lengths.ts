/** BM25 constants, as FTS5's bm25() uses them. */
export const BM25_K1 = 1.2;
export const BM25_B = 0.6;
/** Chunk lengths per stored row of `length_blocks` (uint16 each: 8 KiB a row). */
const LENGTH_BLOCK = 4096;

/** Words as FTS5's unicode61 tokenizer counts them: the document length BM25 normalises by. */
export function wordCount(text: string): number {
  // A scan of the characters instead of a match object per word (this runs for every chunk
  // written); ASCII is decided by range, anything else by the same Unicode classes.
  let n = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    let word: boolean;
    if (c < 128) word = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57);
    else {
      const point = text.codePointAt(i) ?? c;
      if (point > 0xffff) i++;
      word = LETTER_OR_DIGIT.test(String.fromCodePoint(point));
    }
    if (word && !inWord) n++;
    inWord = word;
  }
  return n;
}

const LETTER_OR_DIGIT = /^[\p{L}\p{N}]$/u;

export interface ChunkLengths {
  byRowid: Uint16Array;
  count: number;
  total: number;
  /**
   * BM25's length term by rowid, k1 * (1 - b + b * length / avgdl), or -1 for a row not in the
   * keyword index: worked out once per write instead of once per posting entry (same operations
   * in the same order, so the same scores to the bit).
   */
  norm: Float64Array;
}

/**
 * The word count of every chunk, which BM25 normalises by: stored packed in `length_blocks`
 * (kept current by every write through record(), so an eviction does not re-read 100k rows: that
 * cost ~230 ms) and held in memory until the next write.
 */
export class ChunkLengthStore {
  private lengths: ChunkLengths | null = null;
  /** BM25's length term under a sharded query's global statistics (one pair at a time, until the next write). */
  private globalNorm: { count: number; total: number; norm: Float64Array } | null = null;

  constructor(private readonly storage: DurableObjectStorage) {}

  private get sql(): SqlStorage {
    return this.storage.sql;
  }

  /** Drops what is in memory (a write changed it, or an eviction is simulated). */
  forget(): void {
    this.lengths = null;
    this.globalNorm = null;
  }

  /**
   * BM25's length term by rowid for a collection of `count` chunks of `total` words: this index's
   * own (cached with the lengths) or, in a sharded query, the whole knowledge base's, worked out
   * with the same operations so a shard scores exactly as one index would.
   */
  normFor(count: number, total: number): Float64Array {
    const own = this.get();
    if (count === own.count && total === own.total) return own.norm;
    if (this.globalNorm && this.globalNorm.count === count && this.globalNorm.total === total)
      return this.globalNorm.norm;
    const norm = lengthTerms(own.byRowid, count, total);
    this.globalNorm = { count, total, norm };
    return norm;
  }

  /**
   * Stores the word counts of written chunks, or null for a removed one or one without text;
   * inside the writer's transaction. Stored as count + 1, so 0 means "not in the keyword index".
   */
  record(entries: { rowid: number; tokens: number | null }[]): void {
    this.ensureStored();
    const byBlock = new Map<number, { rowid: number; tokens: number | null }[]>();
    for (const e of entries) {
      const block = Math.floor(e.rowid / LENGTH_BLOCK);
      const list = byBlock.get(block) ?? [];
      list.push(e);
      byBlock.set(block, list);
    }
    for (const [block, list] of byBlock) {
      const row = this.sql
        .exec<{ data: ArrayBuffer }>("SELECT data FROM length_blocks WHERE block = ?", block)
        .toArray()[0];
      const data = row ? new Uint16Array(row.data.slice(0)) : new Uint16Array(LENGTH_BLOCK);
      for (const e of list) data[e.rowid % LENGTH_BLOCK] = e.tokens === null ? 0 : Math.min(e.tokens, 65534) + 1;
      this.sql.exec("INSERT OR REPLACE INTO length_blocks (block, data) VALUES (?, ?)", block, data.buffer);
    }
  }

  /** Builds length_blocks from the chunks once, for an index written before it existed. */
  private ensureStored(): void {
    if (this.sql.exec("SELECT 1 FROM meta WHERE key = 'lengths'").toArray().length) return;
    // All or nothing: the marker and the blocks commit together (a savepoint inside a writer's transaction).
    this.storage.transactionSync(() => {
      this.sql.exec("DELETE FROM length_blocks");
      this.sql.exec("INSERT INTO meta (key, value) VALUES ('lengths', 'v1')");
      const rows = this.sql
        .exec<{ rowid: number; tokens: number | null; text: string | null }>(
          "SELECT rowid, tokens, CASE WHEN tokens IS NULL THEN text END AS text FROM items WHERE text IS NOT NULL AND text != ''",
        )
        .toArray();
      if (rows.length) this.record(rows.map((r) => ({ rowid: r.rowid, tokens: r.tokens ?? wordCount(r.text ?? "") })));
    });
  }

  /** Every chunk's length, with BM25's length term worked out, read back packed after an eviction or a write. */
  get(): ChunkLengths {
    if (this.lengths) return this.lengths;
    this.ensureStored();
    const blocks = this.sql
      .exec<{ block: number; data: ArrayBuffer }>("SELECT block, data FROM length_blocks ORDER BY block")
      .toArray();
    const last = blocks.length ? blocks[blocks.length - 1].block : -1;
    const byRowid = new Uint16Array((last + 1) * LENGTH_BLOCK);
    let count = 0;
    let total = 0;
    for (const b of blocks) {
      const data = new Uint16Array(b.data);
      byRowid.set(data, b.block * LENGTH_BLOCK);
      for (let i = 0; i < data.length; i++) {
        if (data[i] === 0) continue;
        count++;
        total += data[i] - 1;
      }
    }
    this.lengths = { byRowid, count, total, norm: lengthTerms(byRowid, count, total) };
    return this.lengths;
  }
}

/** k1 * (1 - b + b * length / avgdl) for every stored length (-1 where there is none), avgdl = total / count. */
function lengthTerms(byRowid: Uint16Array, count: number, total: number): Float64Array {
  // One pass (no fill first): it runs on every wake, before the JIT has optimised anything.
  const norm = new Float64Array(byRowid.length);
  const avgdl = count ? total / count : 1;
  for (let rowid = 0; rowid < byRowid.length; rowid++) {
    const stored = byRowid[rowid];
    norm[rowid] = stored === 0 ? -1 : BM25_K1 * (1 - BM25_B + (BM25_B * (stored - 1)) / avgdl);
  }
  return norm;
}
