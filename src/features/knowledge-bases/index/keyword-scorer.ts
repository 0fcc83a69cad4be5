import { listBound, StemTopK, type StemPostings } from "./keyword-topk";
import { matchExpression } from "./keyword-query";
import { readPostings, resetWarm, warmSlice, type PostingList } from "./postings-warmer";
import { BM25_K1, ChunkLengthStore } from "./chunk-lengths";
import { porterStem } from "./porter-stemmer";

export { wordCount } from "./chunk-lengths";

/** Cached posting entries above which the cache starts over (memory bound, ~10 bytes each). */
const MAX_CACHED_POSTINGS = 4_000_000;
/** A term's postings are kept in SQLite only up to this many entries (6 bytes each, under the 2 MB row cap). */
const MAX_STORED_POSTINGS = 250_000;
/** Stored posting entries at most (6 bytes each, 48 MB of SQLite): every term of a 200k-chunk index fits (~34 per chunk, BENCHMARKS.md); past it, lists read on first use stay in memory only. */
const MAX_STORED_TOTAL = 8_000_000;

/** Words stemmed per INSERT: two bound parameters each, under SQLite's 100 per statement. */
const STEM_BATCH = 45;

class Rollback extends Error {}

/** The collection statistics BM25 weighs by: chunks in the keyword index, their total length, stems' document frequencies. */
export interface KeywordStats {
  chunks: number;
  total: number;
  df: Record<string, number>;
}

/** FTS5's bm25() idf: ln((N - df + 0.5) / (df + 0.5)), floored at 1e-6 so a term in most chunks still counts a little. */
export function bm25Idf(chunks: number, df: number): number {
  const idf = Math.log((chunks - df + 0.5) / (df + 0.5));
  return idf > 0 ? idf : 1e-6;
}

/**
 * BM25 over a knowledge base's FTS5 index (`items_fts`, read through the `items_terms` fts5vocab
 * table), computed in memory: FTS5 holds the index and does tokenizing and stemming, while the
 * scores are summed over cached posting lists, so a query costs at most a pass over its terms'
 * postings (keyword-topk.ts skips most of the common terms' ones) instead of a bm25() call per
 * matching row. Same index, stemming, k1, b and idf floor as FTS5's
 * bm25(), so the scores are the same.
 *
 * What the scores need survives an eviction in SQLite, packed, so the first query after one does
 * not rebuild it: chunk lengths (`length_blocks`, kept current by every write through
 * recordLengths) and the posting lists read so far (`postings_cache`, emptied by every write
 * through invalidate()). Reading 100k lengths row by row cost ~230 ms, a common term's postings
 * through fts5vocab ~35 ms.
 */
export class KeywordScorer {
  /** Chunk frequency of search terms, kept until the next write. */
  private termFrequency = new Map<string, number>();
  /** Chunk lengths by rowid (chunk-lengths.ts). */
  private readonly lengths: ChunkLengthStore;
  /** Posting lists (rowid, term count) by stemmed term. */
  private postings = new Map<string, PostingList>();
  private postingsSize = 0;
  /** The top-k pass and its scratch buffers (keyword-topk.ts). */
  private readonly topK = new StemTopK();
  /** Each cached list's score bound, under the length terms it was worked out for (global ones in a sharded query). */
  private bounds = new WeakMap<Int32Array, { norm: Float64Array; frac: number }>();
  private stemCache = new Map<string, string[]>();
  /** This instance, and the times what it holds was dropped (every write drops it): see version(). */
  private readonly epoch = crypto.randomUUID();
  private dropped = 0;

  /** Its tables (`length_blocks`, `postings_cache`, and `meta` for bookkeeping) are created by the Durable Object. */
  constructor(private readonly storage: DurableObjectStorage) {
    this.lengths = new ChunkLengthStore(storage);
  }

  /** Stores written chunks' word counts (null: removed or without text), inside the writer's transaction. */
  recordLengths(entries: { rowid: number; tokens: number | null }[]): void {
    this.lengths.record(entries);
  }

  private get sql(): SqlStorage {
    return this.storage.sql;
  }

  /** Drops what is in memory, as an eviction would (stems stay: stemming never changes). */
  forget(): void {
    this.dropped += 1;
    this.termFrequency.clear();
    this.lengths.forget();
    this.postings.clear();
    this.postingsSize = 0;
  }

  /** The chunks changed: drops what depends on them, in memory and stored (inside the writer's transaction). */
  invalidate(): void {
    this.forget();
    this.sql.exec("DELETE FROM postings_cache");
    this.sql.exec("DELETE FROM meta WHERE key = 'stored_postings'");
    resetWarm(this.sql);
  }

  /**
   * One slice of the warm pass (postings-warmer.ts): the next terms' postings read from FTS5 into
   * the stored cache, and into memory while it has room. Answers whether the pass is done.
   */
  warmStep(sliceRows?: number): boolean {
    let done = false;
    this.storage.transactionSync(() => {
      let total = this.storedTotal();
      done = warmSlice(
        this.sql,
        {
          keep: (term, list) => {
            if (list.rows.length > MAX_STORED_POSTINGS) return true;
            if (this.sql.exec("SELECT 1 FROM postings_cache WHERE term = ?", term).toArray().length) return true;
            if (total + list.rows.length > MAX_STORED_TOTAL) return false;
            total += list.rows.length;
            this.sql.exec(
              "INSERT INTO postings_cache (term, rows, tfs) VALUES (?, ?, ?)",
              term,
              list.rows.buffer,
              list.tfs.buffer,
            );
            if (!this.postings.has(term) && this.postingsSize + list.rows.length <= MAX_CACHED_POSTINGS) {
              this.postings.set(term, list);
              this.postingsSize += list.rows.length;
            }
            return true;
          },
        },
        sliceRows,
      );
      this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('stored_postings', ?)", String(total));
    });
    return done;
  }

  private storedTotal(): number {
    return Number(
      this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'stored_postings'").toArray()[0]?.value ?? 0,
    );
  }

  /** How many chunks hold a term (as FTS5 tokenizes and stems it). */
  frequencyOf(term: string): number {
    let df = this.termFrequency.get(term);
    if (df === undefined) {
      df = this.sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM items_fts WHERE items_fts MATCH ?", matchExpression([term]))
        .one().n;
      this.termFrequency.set(term, df);
    }
    return df;
  }

  /**
   * The stemmed forms FTS5 gives these words: plain ASCII words by FTS5's Porter rules in
   * JavaScript; any other uncached word is written as one row of a scratch FTS5 table, its terms
   * read back, and the write rolled back. The answers are kept
   * (bounded) for the object's lifetime.
   */
  private stems(words: string[]): string[] {
    if (this.stemCache.size > 50_000) this.stemCache.clear();
    const missing: string[] = [];
    for (const word of words) {
      if (this.stemCache.has(word)) continue;
      // Plain ASCII words (nearly all) are stemmed in JavaScript as FTS5 would (porter-stemmer.ts); the rest go through FTS5.
      const stem = porterStem(word);
      if (stem === undefined) missing.push(word);
      else this.stemCache.set(word, [stem]);
    }
    if (missing.length) {
      const found = new Map<string, string[]>(missing.map((w) => [w, []]));
      try {
        this.storage.transactionSync(() => {
          // Many rows a statement (each crossing into SQLite costs more than tokenizing one word).
          for (let i = 0; i < missing.length; i += STEM_BATCH) {
            const part = missing.slice(i, i + STEM_BATCH);
            this.sql.exec(
              `INSERT INTO scratch_fts (rowid, text) VALUES ${part.map(() => "(?, ?)").join(", ")}`,
              ...part.flatMap((word, j) => [i + j + 1, word]),
            );
          }
          for (const row of this.sql
            .exec<{ term: string; doc: number }>("SELECT term, doc FROM scratch_words")
            .toArray())
            found.get(missing[row.doc - 1])?.push(row.term);
          throw new Rollback();
        });
      } catch (error) {
        if (!(error instanceof Rollback)) throw error;
      }
      for (const [word, terms] of found) this.stemCache.set(word, terms);
    }
    return [...new Set(words.flatMap((w) => this.stemCache.get(w) ?? []))];
  }

  /** Weighted words as weighted stems: a stem weighs what the words that give it weigh together ("title", "titles"). */
  weightedStems(words: Map<string, number>): Map<string, number> {
    this.stems([...words.keys()]);
    const out = new Map<string, number>();
    for (const [word, weight] of words)
      for (const stem of this.stemCache.get(word) ?? []) out.set(stem, (out.get(stem) ?? 0) + weight);
    return out;
  }

  /** A stem's BM25 idf, as scoreStems weighs it (FTS5's formula, floored just above 0 for stems in most chunks). */
  idfOf(stem: string): number {
    const { count } = this.lengths.get();
    const df = this.postingsOf(stem).rows.length;
    return bm25Idf(count, df);
  }

  /**
   * Names the statistics collectionStats answers now: it changes with every write (invalidate),
   * every drop of what is in memory and every new instance, so a caller may keep a stem's
   * document frequency under it (a sharded query's coordinator does, sharded-stats.ts) and be
   * sure it is still this index's while the version is the same.
   */
  version(): string {
    return `${this.epoch}:${this.dropped}`;
  }

  /** What BM25 needs about the whole index for some stems: chunks, their total length, each stem's df. */
  collectionStats(stems: string[]): KeywordStats {
    const { count, total } = this.lengths.get();
    return { chunks: count, total, df: Object.fromEntries(stems.map((s) => [s, this.postingsOf(s).rows.length])) };
  }

  /** Chunks in the keyword index, and how many hold a stem (its posting list's length). */
  stemFrequency(stem: string): { chunks: number; df: number } {
    return { chunks: this.lengths.get().count, df: this.postingsOf(stem).rows.length };
  }

  /** Which chunks hold a stemmed term, and how often: FTS5's own index, read once and cached (in memory and in SQLite). */
  private postingsOf(stem: string): { rows: Int32Array; tfs: Uint16Array } {
    const cached = this.postings.get(stem);
    if (cached) return cached;
    let entry: { rows: Int32Array; tfs: Uint16Array };
    const stored = this.sql
      .exec<{ rows: ArrayBuffer; tfs: ArrayBuffer }>("SELECT rows, tfs FROM postings_cache WHERE term = ?", stem)
      .toArray()[0];
    if (stored) entry = { rows: new Int32Array(stored.rows), tfs: new Uint16Array(stored.tfs) };
    else {
      entry = readPostings(this.sql, stem);
      this.store(stem, entry);
    }
    if (this.postingsSize + entry.rows.length > MAX_CACHED_POSTINGS) {
      this.postings.clear();
      this.postingsSize = 0;
    }
    this.postings.set(stem, entry);
    this.postingsSize += entry.rows.length;
    return entry;
  }

  private store(stem: string, entry: { rows: Int32Array; tfs: Uint16Array }): void {
    if (entry.rows.length > MAX_STORED_POSTINGS) return;
    const total = this.storedTotal();
    // Full: this list stays in memory only (emptying the store would throw away a warm pass's work).
    if (total + entry.rows.length > MAX_STORED_TOTAL) return;
    const next = total + entry.rows.length;
    this.sql.exec(
      "INSERT OR REPLACE INTO postings_cache (term, rows, tfs) VALUES (?, ?, ?)",
      stem,
      entry.rows.buffer,
      entry.tfs.buffer,
    );
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('stored_postings', ?)", String(next));
  }

  /** The `topK` chunks by BM25 over these query words (each counted once), among `allowed` rowids when given. */
  score(terms: string[], topK: number, allowed: Set<number> | undefined): { rowid: number; score: number }[] {
    return this.scoreStems(this.weightedStems(new Map(terms.map((t) => [t, 1]))), topK, allowed);
  }

  /**
   * The `topK` chunks by query-weighted BM25: each stem's BM25 contribution times its query weight
   * (how often the query says it, or its weight in a feedback-expanded query). A shard of a
   * sharded knowledge base scores with the whole base's `stats` (shard-stages.ts), so its scores
   * are the ones one index would give. With `head`, only the first `head` of that answer are
   * returned (exactly those), and computed with far less work (keyword-topk.ts).
   */
  scoreStems(
    stems: Map<string, number>,
    topK: number,
    allowed: Set<number> | undefined,
    stats?: KeywordStats,
    head?: number,
  ): { rowid: number; score: number }[] {
    const lengths = this.lengths.get();
    // Another shard's view of the collection (a sharded query's global statistics) or this index's own.
    const count = stats ? stats.chunks : lengths.count;
    const total = stats ? stats.total : lengths.total;
    if (lengths.count === 0 || count === 0 || stems.size === 0) return [];
    const norm = this.lengths.normFor(count, total);
    const lists: StemPostings[] = [];
    for (const [stem, weight] of stems) {
      const { rows, tfs } = this.postingsOf(stem);
      if (rows.length === 0 || !(weight > 0)) continue;
      const w = bm25Idf(count, stats ? (stats.df[stem] ?? rows.length) : rows.length) * weight * (BM25_K1 + 1);
      lists.push({ rows, tfs, w, frac: this.boundOf(rows, tfs, norm) });
    }
    return this.topK.top(lists, norm, allowed, topK, Math.min(head ?? topK, topK));
  }

  /** A list's bound under a length term (keyword-topk.ts): one pass over it, kept with the list while the lengths stand. */
  private boundOf(rows: Int32Array, tfs: Uint16Array, norm: Float64Array): number {
    const known = this.bounds.get(rows);
    if (known && known.norm === norm) return known.frac;
    const frac = listBound(rows, tfs, norm);
    this.bounds.set(rows, { norm, frac });
    return frac;
  }
}
