import { TopK } from "./vector-index";
import { exactScores, fullPassSelection, headOf, KthScore, type Ranked, seek } from "./keyword-topk-helpers";

export type { Ranked } from "./keyword-topk-helpers";

/**
 * BM25's top k over a query's posting lists, exactly as a full pass would give it, with far less
 * work ("MaxScore", Turtle & Flood 1995, term-at-a-time). Each stem's contribution to a row is
 * (w x tf) / (tf + norm), at most w x the list's largest tf / (tf + norm): its bound. Stems are
 * walked in decreasing bound; once the bounds of the stems left add up to less than the current
 * k-th partial score (a lower bound on the final k-th), no row none of the walked stems hold can
 * reach the top k, so the stems left only complete the rows already met (looked up by rowid in
 * their sorted lists), and rows that can no longer reach the k-th are dropped as it rises. At a
 * 100k-chunk base a long query's common stems held most of its postings and the least weight.
 *
 * The answer is the full pass's to the bit, ties included: the survivors' scores are summed again
 * in the query's stem order (float addition is not associative), and the survivors go through the
 * full pass's own selection in its order (first stem holding the row, then rowid). Rows left out
 * score strictly below the full pass's k-th, and such rows never change that selection's outcome.
 */

/** One query stem's postings (rowids ascending, each with its term count) and its weight idf x query weight x (k1 + 1). */
export interface StemPostings {
  rows: Int32Array;
  tfs: Uint16Array;
  w: number;
  /** The largest tf / (tf + norm) over the list's scoreable rows (listBound), or NaN when pruning must not be used. */
  frac: number;
}

/**
 * Relative slack on every bound comparison. The pruned pass keeps its running sums as float32
 * (and reads the length terms as float32): half the bytes a row of the two arrays it reads and
 * writes at random, which in a query's cold caches is most of its cost (BENCHMARKS.md, "BM25's
 * running sums in float32"). Each contribution is then within ~6e-8 of the exact one and a sum of
 * at most MAX_LISTS of them within ~MAX_LISTS x 1.2e-7 (all terms are positive), so a sum and the
 * k-th may each be off by a relative eps <= 8e-6; a row is dropped only when it falls short by
 * more than 2 x eps, so no row the exact pass would rank is lost. The survivors' scores are then
 * summed again exactly, in float64 (exactScores).
 */
const MARGIN = 2e-5;
/** More lists than this take the full pass (the float32 sums' error bound above assumes at most this many). */
const MAX_LISTS = 64;
/** Weights outside this range could make a float32 contribution round to 0 or a sum overflow: the full pass takes those. */
const MIN_W = 1e-15;
const MAX_W = 1e15;
/** A posting's tf / (tf + norm) below this could round to 0 in float32 (see listBound). */
const MIN_FRAC = 1e-20;
/** A row looked up by galloping costs about this many postings walked (branchy: measured in a Node replay of the scale bench). */
const SEEK_COST = 6;

/**
 * The largest tf / (tf + norm) among a list's postings that a scorer counts (rowid inside `norm`,
 * a stored length), or NaN when the list is not strictly ascending, holds a 0 term count or a
 * ratio that is not a plain positive number of at least MIN_FRAC: the pruned path relies on all
 * three (every contribution > 0 in float32 too, lists searchable by rowid) and leaves such a list
 * to the full pass.
 */
export function listBound(rows: Int32Array, tfs: Uint16Array, norm: Float64Array): number {
  let best = 0;
  let previous = -1;
  const rowLimit = norm.length;
  for (let i = 0; i < rows.length; i++) {
    const rowid = rows[i];
    if (rowid <= previous) return Number.NaN;
    previous = rowid;
    if (rowid >= rowLimit) continue;
    const n = norm[rowid];
    if (n < 0) continue;
    const tf = tfs[i];
    const frac = tf / (tf + n);
    // A ratio this small (a corrupt length statistic) could round a contribution to 0.
    if (!(frac >= MIN_FRAC && frac <= 1)) return Number.NaN;
    if (frac > best) best = frac;
  }
  return best;
}

/** Scratch buffers reused across queries (a query allocates nothing in proportion to the base). */
export class StemTopK {
  /** The pruned pass's running sums (float32: see MARGIN), all 0 between calls. */
  private scores = new Float32Array(0);
  /** The full pass's sums (float64, exact), all 0 between calls; allocated only if the full pass runs. */
  private exact = new Float64Array(0);
  /** The last length terms read as float32, and the array they came from (a new one is made for every change). */
  private norm32 = new Float32Array(0);
  private norm32Of: Float64Array | null = null;
  private touched = new Int32Array(0);
  private picked = new Int32Array(0);
  private rising = new Int32Array(0);
  private bitmap = new Uint8Array(0);
  private readonly kth = new KthScore();
  private touchedCount = 0;
  /** Postings walked by the last call (for the benchmark's profile and the tests). */
  walked = 0;

  private ensure(rows: number): void {
    if (this.scores.length >= rows) return;
    this.scores = new Float32Array(rows);
    this.touched = new Int32Array(rows);
    this.picked = new Int32Array(rows);
    this.rising = new Int32Array(rows);
    this.bitmap = new Uint8Array(rows);
  }

  /** The full pass: every posting of every stem summed in stem order, then the top `topK` (the reference). */
  exhaustive(lists: StemPostings[], norm: Float64Array, allowed: Set<number> | undefined, topK: number): Ranked[] {
    this.ensure(norm.length);
    if (this.exact.length < norm.length) this.exact = new Float64Array(this.scores.length);
    const scores = this.exact;
    const touched = this.touched;
    let touchedCount = 0;
    const rowLimit = norm.length;
    this.walked = 0;
    for (const { rows, tfs, w } of lists) {
      this.walked += rows.length;
      for (let i = 0; i < rows.length; i++) {
        const rowid = rows[i];
        if (rowid >= rowLimit) continue;
        const n = norm[rowid];
        // -1: no stored length, so not a keyword row this scorer knows (never expected; never scored).
        if (n < 0 || (allowed && !allowed.has(rowid))) continue;
        const tf = tfs[i];
        const s = (w * tf) / (tf + n);
        if (scores[rowid] === 0) touched[touchedCount++] = rowid;
        scores[rowid] += s;
      }
    }
    const best = new TopK(topK);
    let threshold = -Infinity;
    for (let i = 0; i < touchedCount; i++) {
      const rowid = touched[i];
      const score = scores[rowid];
      scores[rowid] = 0;
      if (score <= threshold) continue;
      best.push(score, rowid);
      threshold = best.threshold;
    }
    return best.sorted().map((r) => ({ rowid: r.item, score: r.score }));
  }

  /**
   * The same answer as exhaustive(), pruned (see the top of this file), or only its first `head`
   * rows when that is all the caller reads (pruned against the head's last score: far fewer rows
   * stay in the race). Falls back to the full pass where pruning is not safe.
   */
  top(
    lists: StemPostings[],
    norm: Float64Array,
    allowed: Set<number> | undefined,
    topK: number,
    head = topK,
  ): Ranked[] {
    const safe =
      Number.isInteger(topK) &&
      topK >= 1 &&
      Number.isInteger(head) &&
      head >= 1 &&
      head <= topK &&
      lists.length <= MAX_LISTS &&
      lists.every((l) => l.frac >= 0 && l.w >= MIN_W && l.w <= MAX_W && l.rows.length === l.tfs.length);
    if (!safe || lists.length < 2) return this.exhaustive(lists, norm, allowed, topK).slice(0, head);
    this.ensure(norm.length);
    const norm32 = this.lengthsAsFloat32(norm);
    const m = lists.length;
    const rowLimit = norm.length;
    // The allowed rows as a bitmap: one array read a posting instead of a hash lookup.
    let bitmap: Uint8Array | undefined;
    if (allowed) {
      bitmap = this.bitmap;
      for (const rowid of allowed) if (rowid >= 0 && rowid < rowLimit && Number.isInteger(rowid)) bitmap[rowid] = 1;
    }
    const bound = (j: number): number => lists[j].w * lists[j].frac;
    const walking = lists
      .map((_, j) => j)
      .sort((a, b) => bound(b) - bound(a) || a - b)
      .map((j) => lists[j]);
    // rest[i]: the most the stems from the i-th in walking order on can add to any row, with the slack.
    const rest = new Float64Array(m + 1);
    for (let i = m - 1; i >= 0; i--) rest[i] = rest[i + 1] + walking[i].w * walking[i].frac;
    for (let i = 0; i < m; i++) rest[i] *= 1 + MARGIN;
    this.kth.reset(head, rowLimit);
    this.touchedCount = 0;
    this.walked = 0;
    // Every row any of the first stems holds may still reach the top k: walked whole, as the full pass does.
    let i = 0;
    while (i < m && !(this.kth.floor() > rest[i])) this.walkWhole(walking[i++], norm32, bitmap);
    const count = this.complete(walking, i, rest, norm32);
    this.kth.clear();
    const survivors = this.picked.slice(0, count);
    // Every other row met was set back to 0 as it left (keep()), so the buffer is all 0 again after this.
    for (const rowid of survivors) this.scores[rowid] = 0;
    if (bitmap) bitmap.fill(0);
    const exact = exactScores(lists, norm, survivors);
    if (head === topK) return fullPassSelection(survivors, exact, topK);
    // Only the head was pruned for: its answer stands when fewer than topK rows reach its last score.
    return headOf(survivors, exact.sums, head, topK) ?? this.top(lists, norm, allowed, topK).slice(0, head);
  }

  /** The length terms as float32 (kept for the array they came from: a write makes a new one). */
  private lengthsAsFloat32(norm: Float64Array): Float32Array {
    if (this.norm32Of !== norm) {
      // Exactly as long: the passes take norm.length as the rowid limit.
      if (this.norm32.length !== norm.length) this.norm32 = new Float32Array(norm.length);
      this.norm32.set(norm);
      this.norm32Of = norm;
    }
    return this.norm32;
  }

  /** Adds a stem's every posting to the scores, noting rows met for the first time and the k-th as it rises. */
  private walkWhole({ rows, tfs, w }: StemPostings, norm: Float32Array, bitmap: Uint8Array | undefined): void {
    const scores = this.scores;
    const touched = this.touched;
    const kth = this.kth;
    const rowLimit = norm.length;
    let touchedCount = this.touchedCount;
    // Rows that rose past the k-th as it stood before this stem: offered after the walk, so the
    // loop itself makes no call (it runs over every posting and is as tight as the full pass's).
    const floor = kth.floor();
    const rising = this.rising;
    let risen = 0;
    for (let p = 0; p < rows.length; p++) {
      const rowid = rows[p];
      if (rowid >= rowLimit) continue;
      const n = norm[rowid];
      if (n < 0 || (bitmap !== undefined && bitmap[rowid] === 0)) continue;
      const tf = tfs[p];
      const before = scores[rowid];
      if (before === 0) touched[touchedCount++] = rowid;
      scores[rowid] = before + (w * tf) / (tf + n);
      if (scores[rowid] > floor) rising[risen++] = rowid;
    }
    for (let r = 0; r < risen; r++) {
      const rowid = rising[r];
      const score = scores[rowid];
      if (score > kth.floor()) kth.offer(rowid, score);
    }
    this.touchedCount = touchedCount;
    this.walked += rows.length;
  }

  /**
   * Completes the rows met so far with the stems from the `from`-th on (walking order): first
   * only the rows that the stems left could lift to the k-th are kept (the others' scores go
   * back to 0, as for a row never met), then stem by stem each kept row gains its contribution and rows
   * that can no longer reach the k-th leave. A stem is looked up row by row (its list searched
   * from where the previous row left it) when few rows are left, else walked whole, skipping rows
   * not kept. Leaves the rows that reach the k-th in `picked`, by rowid; answers how many.
   */
  private complete(walking: StemPostings[], from: number, rest: Float64Array, norm: Float32Array): number {
    const m = walking.length;
    const scores = this.scores;
    const picked = this.picked;
    const kth = this.kth;
    let floor = kth.floor();
    let count = this.keep(this.touched, this.touchedCount, rest[from], floor);
    let sorted = false;
    for (let t = from; t < m; t++) {
      const { rows, tfs, w } = walking[t];
      const len = rows.length;
      if (count * SEEK_COST < len) {
        if (!sorted) picked.subarray(0, count).sort();
        sorted = true;
        let at = 0;
        for (let c = 0; c < count && at < len; c++) {
          const rowid = picked[c];
          at = seek(rows, len, at, rowid);
          if (at < len && rows[at] === rowid) {
            const tf = tfs[at];
            scores[rowid] += (w * tf) / (tf + norm[rowid]);
            const after = scores[rowid];
            if (after > floor) {
              kth.offer(rowid, after);
              floor = kth.floor();
            }
          }
        }
        this.walked += count;
      } else {
        const rowLimit = norm.length;
        for (let p = 0; p < len; p++) {
          const rowid = rows[p];
          if (rowid >= rowLimit) continue;
          const before = scores[rowid];
          // 0: never met (cannot reach the k-th) or left.
          if (before === 0) continue;
          const tf = tfs[p];
          scores[rowid] = before + (w * tf) / (tf + norm[rowid]);
          const after = scores[rowid];
          if (after > floor) {
            kth.offer(rowid, after);
            floor = kth.floor();
          }
        }
        this.walked += len;
      }
      count = this.keep(picked, count, rest[t + 1], floor);
    }
    if (!sorted) picked.subarray(0, count).sort();
    return count;
  }

  /** Keeps (into `picked`, order kept) the rows of `from` that `rest` more could lift to `floor`; the others' scores go back to 0. */
  private keep(from: Int32Array, count: number, rest: number, floor: number): number {
    const scores = this.scores;
    const picked = this.picked;
    let kept = 0;
    for (let c = 0; c < count; c++) {
      const rowid = from[c];
      const score = scores[rowid];
      if (score * (1 + MARGIN) + rest >= floor) picked[kept++] = rowid;
      else scores[rowid] = 0;
    }
    return kept;
  }
}
