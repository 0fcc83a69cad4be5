/**
 * Rank fusion. Reciprocal rank fusion needs no score calibration; weighted fusion standardises
 * each list's scores first, then mixes `alpha * vector + (1 - alpha) * keyword`.
 */
export interface Scored<K extends string | number = string> {
  id: K;
  score: number;
}

/** The constant of Cormack et al.; it damps the weight of the very first ranks. */
export const RRF_K = 60;

export function reciprocalRankFusion<K extends string | number>(lists: Scored<K>[][], weights?: number[]): Scored<K>[] {
  const scores = new Map<K, number>();
  lists.forEach((list, l) => {
    const weight = weights?.[l] ?? 1;
    list.forEach((item, rank) => scores.set(item.id, (scores.get(item.id) ?? 0) + weight / (RRF_K + rank + 1)));
  });
  return sortScores(scores);
}

/** A list's scores are standardised over its first this many items: the candidates that compete for the top. */
const STANDARDISE_HEAD = 100;

/**
 * Scores as z-scores (mean and spread of the list's head), and the score an item missing from the
 * list gets: the list's lowest, or 0 if that is higher. Unlike min-max, a list's scale is set by
 * its head as a whole rather than by its two extremes (one far-ahead hit, one stray tail item).
 *
 * `unmatched`: the score every item not in the list truly has (BM25 gives a chunk with none of the
 * query's terms 0). A list shorter than the head is padded with it, and a missing item gets it:
 * otherwise a term only one chunk holds made a one-item list whose hit stood at z = 1, no more than
 * an ordinary vector neighbour, and lost to it.
 */
function standardise<K extends string | number>(
  list: Scored<K>[],
  unmatched?: number,
): { z: Map<K, number>; missing: number } {
  const z = new Map<K, number>();
  if (list.length === 0) return { z, missing: 0 };
  const head = list.slice(0, STANDARDISE_HEAD).map((item) => item.score);
  if (unmatched !== undefined) while (head.length < STANDARDISE_HEAD) head.push(unmatched);
  const mean = head.reduce((a, score) => a + score, 0) / head.length;
  const spread = Math.sqrt(head.reduce((a, score) => a + (score - mean) ** 2, 0) / head.length);
  const zOf = (score: number): number => (spread > 0 ? (score - mean) / spread : 1);
  let lowest = 0;
  for (const item of list) {
    // All scores equal: being in the list is all it says.
    const value = zOf(item.score);
    z.set(item.id, value);
    lowest = Math.min(lowest, value);
  }
  return { z, missing: unmatched !== undefined && spread > 0 ? zOf(unmatched) : lowest };
}

/**
 * `alpha * vector + (1 - alpha) * keyword` over standardised scores (CombSUM of z-scores): 0 is an
 * average candidate, the best are a few units above. Left unscaled on purpose: keyword feedback
 * weighs its feedback chunks by these scores, and rescaling the list to [0, 1] made the top five
 * weigh nearly the same (measured lower on both collections, BENCHMARKS.md). Keyword scores are
 * BM25, so a chunk the keyword list lacks scores 0 there.
 */
export function weightedFusion<K extends string | number>(
  vector: Scored<K>[],
  keyword: Scored<K>[],
  alpha: number,
): Scored<K>[] {
  const v = standardise(vector);
  const k = standardise(keyword, 0);
  const mixed = new Map<K, number>();
  for (const id of new Set([...v.z.keys(), ...k.z.keys()]))
    mixed.set(id, alpha * (v.z.get(id) ?? v.missing) + (1 - alpha) * (k.z.get(id) ?? k.missing));
  return sortScores(mixed);
}

/** Fuses the result lists of several queries by each item's best score. */
export function maxFusion<K extends string | number>(lists: Scored<K>[][]): Scored<K>[] {
  const scores = new Map<K, number>();
  for (const list of lists)
    for (const item of list) scores.set(item.id, Math.max(scores.get(item.id) ?? -Infinity, item.score));
  return sortScores(scores);
}

function sortScores<K extends string | number>(scores: Map<K, number>): Scored<K>[] {
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}
