/**
 * Rank fusion. Reciprocal rank fusion needs no score calibration; weighted fusion min-max
 * normalises each list to [0, 1] first, then mixes `alpha * vector + (1 - alpha) * keyword`.
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

function normalise<K extends string | number>(list: Scored<K>[]): Map<K, number> {
  const out = new Map<K, number>();
  if (list.length === 0) return out;
  let min = Infinity;
  let max = -Infinity;
  for (const item of list) {
    min = Math.min(min, item.score);
    max = Math.max(max, item.score);
  }
  const span = max - min;
  for (const item of list) out.set(item.id, span > 0 ? (item.score - min) / span : 1);
  return out;
}

export function weightedFusion<K extends string | number>(vector: Scored<K>[], keyword: Scored<K>[], alpha: number): Scored<K>[] {
  const v = normalise(vector);
  const k = normalise(keyword);
  const scores = new Map<K, number>();
  for (const id of new Set([...v.keys(), ...k.keys()])) scores.set(id, alpha * (v.get(id) ?? 0) + (1 - alpha) * (k.get(id) ?? 0));
  return sortScores(scores);
}

/** Fuses the result lists of several queries by each item's best score. */
export function maxFusion<K extends string | number>(lists: Scored<K>[][]): Scored<K>[] {
  const scores = new Map<K, number>();
  for (const list of lists) for (const item of list) scores.set(item.id, Math.max(scores.get(item.id) ?? -Infinity, item.score));
  return sortScores(scores);
}

function sortScores<K extends string | number>(scores: Map<K, number>): Scored<K>[] {
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}
