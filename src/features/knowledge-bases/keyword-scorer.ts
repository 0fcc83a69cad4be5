import { TopK } from "./vector-index";
import { matchExpression } from "./keyword-query";

/** BM25 constants, as FTS5's bm25() uses them. */
const BM25_K1 = 1.2;
const BM25_B = 0.75;
/** Cached posting entries above which the cache starts over (memory bound, ~10 bytes each). */
const MAX_CACHED_POSTINGS = 4_000_000;

class Rollback extends Error {}

/** Words as FTS5's unicode61 tokenizer counts them: the document length BM25 normalises by. */
export function wordCount(text: string): number {
  let n = 0;
  for (const _ of text.matchAll(/[\p{L}\p{N}]+/gu)) n++;
  return n;
}

/**
 * BM25 over a knowledge base's FTS5 index (`items_fts`, read through the `items_terms` fts5vocab
 * table), computed in memory: FTS5 holds the index and does tokenizing and stemming, while the
 * scores are summed over cached posting lists, so a query costs a pass over its terms' postings
 * instead of a bm25() call per matching row. Same index, stemming, k1, b and idf floor as FTS5's
 * bm25(), so the scores are the same. Every write to the chunks must call forget().
 */
export class KeywordScorer {
  /** Chunk frequency of search terms, kept until the next write. */
  private termFrequency = new Map<string, number>();
  /** Chunk lengths by rowid. */
  private lengths: { byRowid: Float32Array; count: number; total: number } | null = null;
  /** Posting lists (rowid, term count) by stemmed term. */
  private postings = new Map<string, { rows: Int32Array; tfs: Uint16Array }>();
  private postingsSize = 0;
  private scoreBuffer = new Float64Array(0);
  private stemCache = new Map<string, string[]>();

  constructor(private readonly storage: DurableObjectStorage) {}

  private get sql(): SqlStorage {
    return this.storage.sql;
  }

  /** Drops what depends on the chunks (stems stay: stemming never changes). */
  forget(): void {
    this.termFrequency.clear();
    this.lengths = null;
    this.postings.clear();
    this.postingsSize = 0;
  }

  /** How many chunks hold a term (as FTS5 tokenizes and stems it). */
  frequencyOf(term: string): number {
    let df = this.termFrequency.get(term);
    if (df === undefined) {
      df = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items_fts WHERE items_fts MATCH ?", matchExpression([term])).one().n;
      this.termFrequency.set(term, df);
    }
    return df;
  }

  /**
   * The stemmed forms FTS5 gives these words: each uncached word is written as one row of a
   * scratch FTS5 table, its terms read back, and the write rolled back. The answers are kept
   * (bounded) for the object's lifetime.
   */
  private stems(words: string[]): string[] {
    const missing = words.filter((w) => !this.stemCache.has(w));
    if (missing.length) {
      const found = new Map<string, string[]>(missing.map((w) => [w, []]));
      try {
        this.storage.transactionSync(() => {
          missing.forEach((word, i) => this.sql.exec("INSERT INTO scratch_fts (rowid, text) VALUES (?, ?)", i + 1, word));
          for (const row of this.sql.exec<{ term: string; doc: number }>("SELECT term, doc FROM scratch_words").toArray()) found.get(missing[row.doc - 1])?.push(row.term);
          throw new Rollback();
        });
      } catch (error) {
        if (!(error instanceof Rollback)) throw error;
      }
      if (this.stemCache.size > 50_000) this.stemCache.clear();
      for (const [word, terms] of found) this.stemCache.set(word, terms);
    }
    return [...new Set(words.flatMap((w) => this.stemCache.get(w) ?? []))];
  }

  private chunkLengths(): { byRowid: Float32Array; count: number; total: number } {
    if (this.lengths) return this.lengths;
    const rows = this.sql.exec<{ rowid: number; tokens: number | null; text: string | null }>("SELECT rowid, tokens, CASE WHEN tokens IS NULL THEN text END AS text FROM items WHERE text IS NOT NULL AND text != ''").toArray();
    let max = 0;
    for (const r of rows) max = Math.max(max, r.rowid);
    const byRowid = new Float32Array(max + 1);
    let total = 0;
    for (const r of rows) {
      const n = r.tokens ?? wordCount(r.text ?? "");
      byRowid[r.rowid] = n;
      total += n;
    }
    this.lengths = { byRowid, count: rows.length, total };
    return this.lengths;
  }

  /** Which chunks hold a stemmed term, and how often: FTS5's own index, read once and cached. */
  private postingsOf(stem: string): { rows: Int32Array; tfs: Uint16Array } {
    const cached = this.postings.get(stem);
    if (cached) return cached;
    const rows = this.sql.exec<{ doc: number; n: number }>("SELECT doc, count(*) AS n FROM items_terms WHERE term = ? GROUP BY doc", stem).toArray();
    const entry = { rows: Int32Array.from(rows, (r) => r.doc), tfs: Uint16Array.from(rows, (r) => Math.min(r.n, 65535)) };
    if (this.postingsSize + rows.length > MAX_CACHED_POSTINGS) {
      this.postings.clear();
      this.postingsSize = 0;
    }
    this.postings.set(stem, entry);
    this.postingsSize += rows.length;
    return entry;
  }

  /** The `topK` chunks by BM25 over these query terms, among `allowed` rowids when given. */
  score(terms: string[], topK: number, allowed: Set<number> | undefined): { rowid: number; score: number }[] {
    const stems = this.stems(terms);
    const { byRowid, count, total } = this.chunkLengths();
    if (count === 0 || stems.length === 0) return [];
    const avgdl = total / count;
    if (this.scoreBuffer.length < byRowid.length) this.scoreBuffer = new Float64Array(byRowid.length);
    const scores = this.scoreBuffer;
    const touched: number[] = [];
    for (const stem of stems) {
      const { rows, tfs } = this.postingsOf(stem);
      if (rows.length === 0) continue;
      let idf = Math.log((count - rows.length + 0.5) / (rows.length + 0.5));
      if (idf <= 0) idf = 1e-6;
      for (let i = 0; i < rows.length; i++) {
        const rowid = rows[i];
        if (rowid >= byRowid.length || (allowed && !allowed.has(rowid))) continue;
        const tf = tfs[i];
        const s = (idf * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * byRowid[rowid]) / avgdl));
        if (scores[rowid] === 0) touched.push(rowid);
        scores[rowid] += s;
      }
    }
    const best = new TopK(topK);
    for (const rowid of touched) {
      best.push(scores[rowid], rowid);
      scores[rowid] = 0;
    }
    return best.sorted().map((r) => ({ rowid: r.item, score: r.score }));
  }
}
