/**
 * Reads every term's posting list out of FTS5 ahead of queries, into the stored posting cache
 * (`postings_cache`), a slice at a time from the index object's alarm. Without it, the first query
 * to use a term read that term's postings through fts5vocab (3-20 ms a term at 100k chunks, and a
 * hybrid query with feedback touches ~40-60 stems), which made the p99 (BENCHMARKS.md "Speed").
 * One pass in term order reads the whole index once (~0.3 us an occurrence), where term-by-term
 * reads would pay the lookup per term.
 *
 * Progress lives in `meta` (`warm_after`: the last term stored; `warm_done`), which every write
 * clears along with the cache (KeywordScorer.invalidate), so a warm pass never mixes postings from
 * before and after a write.
 */

/** Below this many chunks a term's postings read in well under a millisecond: no warm pass. */
export const WARM_MIN_CHUNKS = 20_000;
/** Term occurrences read per alarm slice (~6 ms on a quiet machine), so queries wait at most about that long behind one. */
export const WARM_SLICE_ROWS = 20_000;

export interface PostingList {
  rows: Int32Array;
  tfs: Uint16Array;
}

export interface WarmTarget {
  /** Stores a term's list; false when the stored cache is full (the pass stops there). */
  keep(term: string, list: PostingList): boolean;
}

function meta(sql: SqlStorage, key: string): string | undefined {
  return sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value;
}

/** Whether a warm pass has covered every term since the last write. */
export function warmed(sql: SqlStorage): boolean {
  return meta(sql, "warm_done") !== undefined;
}

/** Forgets warm progress (inside a writer's transaction, with the cache it describes). */
export function resetWarm(sql: SqlStorage): void {
  sql.exec("DELETE FROM meta WHERE key IN ('warm_after', 'warm_done')");
}

/** Counts a term's occurrences, streamed in chunk order, into (chunk, term count) pairs. */
class PostingBuilder {
  private docs: number[] = [];
  private counts: number[] = [];
  private ordered = true;

  add(id: number): void {
    const end = this.docs.length - 1;
    if (end >= 0 && this.docs[end] === id) this.counts[end]++;
    else {
      if (end >= 0 && id < this.docs[end]) this.ordered = false;
      this.docs.push(id);
      this.counts.push(1);
    }
  }

  build(): PostingList {
    let docs = this.docs;
    let counts = this.counts;
    if (!this.ordered) {
      // Not in chunk order after all (never seen, but never trusted either): repeated chunks merged.
      const merged = new Map<number, number>();
      docs.forEach((d, i) => merged.set(d, (merged.get(d) ?? 0) + counts[i]));
      const sorted = [...merged].sort((a, b) => a[0] - b[0]);
      docs = sorted.map((e) => e[0]);
      counts = sorted.map((e) => e[1]);
    }
    return { rows: Int32Array.from(docs), tfs: Uint16Array.from(counts, (n) => Math.min(n, 65535)) };
  }
}

/**
 * One term's postings from FTS5's index: one row per occurrence, counted as they stream (about
 * twice as fast as GROUP BY with row objects: 10 ms instead of 21 ms for a term in 22k of 100k chunks).
 */
export function readPostings(sql: SqlStorage, term: string): PostingList {
  const builder = new PostingBuilder();
  for (const [doc] of sql.exec("SELECT doc FROM items_terms WHERE term = ?", term).raw()) builder.add(Number(doc));
  return builder.build();
}

/**
 * One slice: terms after `warm_after`, in order, each counted as its occurrences stream, stopping
 * at the first term boundary past `sliceRows` occurrences. Answers whether every term is now done.
 */
export function warmSlice(sql: SqlStorage, target: WarmTarget, sliceRows = WARM_SLICE_ROWS): boolean {
  const after = meta(sql, "warm_after") ?? "";
  let term: string | null = null;
  let builder = new PostingBuilder();
  let read = 0;
  let finished = true;
  let full = false;
  let last = after;
  const flush = (): boolean => {
    if (term === null) return true;
    if (!target.keep(term, builder.build())) return false;
    last = term;
    return true;
  };
  for (const [t, doc] of sql.exec("SELECT term, doc FROM items_terms WHERE term > ?", after).raw()) {
    const next = String(t);
    if (next !== term) {
      if (!flush()) {
        full = true;
        break;
      }
      if (read >= sliceRows) {
        finished = false;
        break;
      }
      term = next;
      builder = new PostingBuilder();
    }
    read++;
    builder.add(Number(doc));
  }
  if (finished && !full && !flush()) full = true;
  // A full cache ends the pass too: the terms left are read on first use, as before.
  const done = finished || full;
  sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('warm_after', ?)", last);
  if (done) sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('warm_done', '1')");
  return done;
}
