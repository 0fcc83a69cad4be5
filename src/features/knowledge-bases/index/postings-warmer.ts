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
  sql.exec("DELETE FROM meta WHERE key IN ('warm_after', 'warm_done', 'warm_part')");
  ensureParts(sql);
  sql.exec("DELETE FROM postings_parts");
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
 * A term whose occurrences outrun a slice is read across several: each slice stores the part it
 * read (`postings_parts`, in chunk order, cut only between chunks so no chunk's count is split) and
 * `warm_part` says which term and the last chunk read; the next slice reads that term's chunks
 * after it and, at the term's end, keeps the parts joined as one list. Without this one very
 * common term (~300k occurrences at 100k chunks) made one slice of ~100 ms that queries waited behind.
 */
function ensureParts(sql: SqlStorage): void {
  sql.exec(
    "CREATE TABLE IF NOT EXISTS postings_parts (part INTEGER PRIMARY KEY, rows BLOB NOT NULL, tfs BLOB NOT NULL)",
  );
}

interface PartialTerm {
  term: string;
  lastDoc: number;
}

function partialTerm(sql: SqlStorage): PartialTerm | undefined {
  const value = meta(sql, "warm_part");
  return value === undefined ? undefined : (JSON.parse(value) as PartialTerm);
}

/** Stores the part of a term read so far, and where its next slice resumes. */
function savePart(sql: SqlStorage, term: string, lastDoc: number, list: PostingList): void {
  ensureParts(sql);
  sql.exec(
    "INSERT INTO postings_parts (part, rows, tfs) VALUES ((SELECT coalesce(max(part), 0) + 1 FROM postings_parts), ?, ?)",
    list.rows.buffer,
    list.tfs.buffer,
  );
  sql.exec(
    "INSERT OR REPLACE INTO meta (key, value) VALUES ('warm_part', ?)",
    JSON.stringify({ term, lastDoc } satisfies PartialTerm),
  );
}

/** The stored parts of the partial term followed by `tail`, as one list; the parts are deleted. */
function joinParts(sql: SqlStorage, tail: PostingList): PostingList {
  ensureParts(sql);
  const parts: PostingList[] = sql
    .exec<{ rows: ArrayBuffer; tfs: ArrayBuffer }>("SELECT rows, tfs FROM postings_parts ORDER BY part")
    .toArray()
    .map((p) => ({ rows: new Int32Array(p.rows), tfs: new Uint16Array(p.tfs) }));
  parts.push(tail);
  const length = parts.reduce((n, p) => n + p.rows.length, 0);
  const rows = new Int32Array(length);
  const tfs = new Uint16Array(length);
  let at = 0;
  for (const p of parts) {
    rows.set(p.rows, at);
    tfs.set(p.tfs, at);
    at += p.rows.length;
  }
  sql.exec("DELETE FROM postings_parts");
  sql.exec("DELETE FROM meta WHERE key = 'warm_part'");
  return { rows, tfs };
}

/**
 * One slice: terms after `warm_after` (first the rest of a term a previous slice stopped inside),
 * in order, each counted as its occurrences stream, stopping at the first chunk boundary past
 * `sliceRows` occurrences (inside a term if need be). Answers whether every term is now done.
 */
export function warmSlice(sql: SqlStorage, target: WarmTarget, sliceRows = WARM_SLICE_ROWS): boolean {
  let after = meta(sql, "warm_after") ?? "";
  let read = 0;
  const partial = partialTerm(sql);
  if (partial) {
    // Resumes inside the term: SQLite skips the chunks already read (in C, about a third of the cost of reading them).
    const builder = new PostingBuilder();
    let lastDoc = partial.lastDoc;
    for (const [d] of sql
      .exec("SELECT doc FROM items_terms WHERE term = ? AND doc > ?", partial.term, partial.lastDoc)
      .raw()) {
      const doc = Number(d);
      if (read >= sliceRows && doc !== lastDoc) {
        savePart(sql, partial.term, lastDoc, builder.build());
        return false;
      }
      read++;
      builder.add(doc);
      lastDoc = doc;
    }
    if (!target.keep(partial.term, joinParts(sql, builder.build()))) return finish(sql, after, true);
    after = partial.term;
  }
  let term: string | null = null;
  let builder = new PostingBuilder();
  let lastDoc = -1;
  let last = after;
  const flush = (): boolean => {
    if (term === null) return true;
    if (!target.keep(term, builder.build())) return false;
    last = term;
    return true;
  };
  for (const [t, d] of sql.exec("SELECT term, doc FROM items_terms WHERE term > ?", after).raw()) {
    const next = String(t);
    const doc = Number(d);
    if (next !== term) {
      if (!flush()) return finish(sql, last, true);
      if (read >= sliceRows) return finish(sql, last, false);
      term = next;
      builder = new PostingBuilder();
    } else if (read >= sliceRows && doc !== lastDoc) {
      // Past the slice inside one long term: the part read so far waits for the next slice.
      savePart(sql, next, lastDoc, builder.build());
      return finish(sql, last, false);
    }
    read++;
    builder.add(doc);
    lastDoc = doc;
  }
  // The last term, stored if the cache has room; a full cache ends the pass too (the terms left are read on first use).
  flush();
  return finish(sql, last, true);
}

/** Records the last whole term stored and, when the pass is over, that it is done. */
function finish(sql: SqlStorage, last: string, done: boolean): boolean {
  sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('warm_after', ?)", last);
  if (done) sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('warm_done', '1')");
  return done;
}
