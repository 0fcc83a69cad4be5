import { TopK } from "./vector-index";

/** Small routines of the pruned BM25 top k (keyword-topk.ts). */

export interface Ranked {
  rowid: number;
  score: number;
}

/** The rows of a pruned pass, by rowid, with their scores as the full pass sums them and the first stem holding each. */
export interface ExactScores {
  sums: Float64Array;
  first: Int32Array;
}

/**
 * Scores of `rows` (ascending) summed as the full pass sums them: stem after stem in the query's
 * order, from 0 (float addition is not associative, so another order could differ in the last bit).
 */
export function exactScores(
  lists: { rows: Int32Array; tfs: Uint16Array; w: number }[],
  norm: Float64Array,
  picked: Int32Array,
): ExactScores {
  const count = picked.length;
  const sums = new Float64Array(count);
  const first = new Int32Array(count).fill(-1);
  for (let j = 0; j < lists.length; j++) {
    const { rows, tfs, w } = lists[j];
    const len = rows.length;
    let at = 0;
    for (let c = 0; c < count && at < len; c++) {
      const rowid = picked[c];
      at = seek(rows, len, at, rowid);
      if (at < len && rows[at] === rowid) {
        const tf = tfs[at];
        sums[c] += (w * tf) / (tf + norm[rowid]);
        if (first[c] < 0) first[c] = j;
      }
    }
  }
  return { sums, first };
}

/**
 * The full pass's own selection over these rows, in the order it meets them (by the first stem
 * holding a row, then by rowid), skipping a row that only ties the k-th as it does: the same
 * rows win a tie at the cut.
 */
export function fullPassSelection(picked: Int32Array, { sums, first }: ExactScores, topK: number): Ranked[] {
  const sequence = Array.from({ length: picked.length }, (_, c) => c).sort((a, b) => first[a] - first[b] || a - b);
  const best = new TopK(topK);
  let threshold = Number.NEGATIVE_INFINITY;
  for (const c of sequence) {
    const score = sums[c];
    if (score <= threshold) continue;
    best.push(score, picked[c]);
    threshold = best.threshold;
  }
  return best.sorted().map((r) => ({ rowid: r.item, score: r.score }));
}

/**
 * The first `head` rows of the full pass's top `topK`, from rows including every row that scores
 * at least the head's last score: when fewer than topK do, all of them are inside the top topK
 * (its cut lies below), which orders them by score, then rowid. Undefined when topK rows or more
 * reach it (then ties at the cut are decided by the full pass's order: the caller asks for it).
 */
export function headOf(picked: Int32Array, sums: Float64Array, head: number, topK: number): Ranked[] | undefined {
  const ranked = Array.from(picked, (rowid, c) => ({ rowid, score: sums[c] })).sort(
    (a, b) => b.score - a.score || a.rowid - b.rowid,
  );
  const last = ranked.length >= head ? ranked[head - 1].score : Number.NEGATIVE_INFINITY;
  let reaching = 0;
  for (const r of ranked) if (r.score >= last) reaching++;
  return reaching < topK ? ranked.slice(0, head) : undefined;
}

/**
 * The first index at or after `from` whose rowid is at least `rowid`, in a list sorted ascending:
 * galloping (1, 2, 4 ... ahead, then halving), so a pass over sorted lookups costs about
 * log(gap) each, and a list is never walked where its rows are not asked for.
 */
export function seek(rows: Int32Array, len: number, from: number, rowid: number): number {
  if (from >= len || rows[from] >= rowid) return from;
  let lo = from;
  let step = 1;
  let hi = from + 1;
  while (hi < len && rows[hi] < rowid) {
    lo = hi;
    step *= 2;
    hi = lo + step;
  }
  if (hi > len) hi = len;
  // rows[lo] < rowid, and hi is the end or rows[hi] >= rowid.
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid] < rowid) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * The k largest scores met so far, as a min-heap by row, so the k-th is known after every
 * addition at the price of a compare: a row whose score rises past the k-th joins (or moves up),
 * pushing out the k-th. `positions` (by rowid, 1-based, 0 for a row not held) is shared scratch
 * that clear() leaves all 0 again.
 */
export class KthScore {
  private rows = new Int32Array(0);
  private keys = new Float64Array(0);
  private size = 0;
  private k = 0;
  positions = new Int32Array(0);

  reset(k: number, rowLimit: number): void {
    if (this.positions.length < rowLimit) this.positions = new Int32Array(rowLimit);
    if (this.rows.length < k) {
      this.rows = new Int32Array(k);
      this.keys = new Float64Array(k);
    }
    this.k = k;
    this.size = 0;
  }

  /** The k-th largest score held (a lower bound on the final k-th, as scores only rise), -Infinity until k rows are. */
  floor(): number {
    return this.size < this.k ? Number.NEGATIVE_INFINITY : this.keys[0];
  }

  /** A row's score rose to `score`, above floor(). */
  offer(rowid: number, score: number): void {
    const held = this.positions[rowid];
    if (held !== 0) {
      this.keys[held - 1] = score;
      this.down(held - 1);
    } else if (this.size < this.k) {
      let at = this.size++;
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (this.keys[parent] <= score) break;
        this.place(at, this.rows[parent], this.keys[parent]);
        at = parent;
      }
      this.place(at, rowid, score);
    } else {
      this.positions[this.rows[0]] = 0;
      this.place(0, rowid, score);
      this.down(0);
    }
  }

  clear(): void {
    for (let i = 0; i < this.size; i++) this.positions[this.rows[i]] = 0;
    this.size = 0;
  }

  private place(at: number, rowid: number, score: number): void {
    this.rows[at] = rowid;
    this.keys[at] = score;
    this.positions[rowid] = at + 1;
  }

  private down(from: number): void {
    const rowid = this.rows[from];
    const score = this.keys[from];
    let at = from;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= this.size) break;
      if (child + 1 < this.size && this.keys[child + 1] < this.keys[child]) child++;
      if (this.keys[child] >= score) break;
      this.place(at, this.rows[child], this.keys[child]);
      at = child;
    }
    this.place(at, rowid, score);
  }
}
