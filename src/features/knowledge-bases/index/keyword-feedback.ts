import { tokenize } from "../chunker";
import { isStopword } from "./keyword-query";

/**
 * Pseudo-relevance feedback inside the keyword retriever, on by default: the first BM25 pass's
 * top chunks are taken as relevant, their strongest terms (RM3: term frequency in each chunk,
 * weighted by the chunk's score, times idf) are mixed with the query's own, and BM25 runs once
 * more. It costs one more pass over posting lists and the text of FEEDBACK.docs chunks already in
 * the same SQLite, no extra round trip; measured in `npm run eval:retrieval` (BENCHMARKS.md).
 */
export const FEEDBACK = {
  /** Top chunks of the first pass taken as relevant. */
  docs: 5,
  /** Feedback terms mixed into the query. */
  terms: 20,
  /** Stems of the relevance model whose idf is looked up (the strongest by frequency alone). */
  candidates: 40,
  /** The query's own share of the mixed weights (RM3's lambda), at least: see feedbackLambda. */
  originalWeight: 0.5,
  /**
   * A feedback term must occur in at least this many of the feedback chunks (or be a query
   * term). A word only one of them holds says what that chunk is about, not the query; RM3 weighs
   * it by its frequency there all the same, and the second pass then put that very chunk first,
   * far ahead of the rest (measured in `npm run eval:retrieval`, BENCHMARKS.md).
   */
  minShared: 2,
} as const;

/**
 * RM3's lambda for a query of `queryTerms` stems mixed with `feedbackTerms`: FEEDBACK.originalWeight,
 * raised for long queries so that the query's own terms weigh on average no less than a feedback
 * term. Both sides are normalised to sum 1, so at a fixed 0.5 a 40-stem request's own terms
 * weighed half as much each as 20 feedback terms, and the expansion, not the request, led.
 */
export function feedbackLambda(queryTerms: number, feedbackTerms: number): number {
  const share = queryTerms + feedbackTerms > 0 ? queryTerms / (queryTerms + feedbackTerms) : 1;
  return Math.max(FEEDBACK.originalWeight, share);
}

/** The content words of a chunk's text, counted (function words, numbers and 1-2 letter words left out). */
export function feedbackWords(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const token of tokenize(text)) {
    const word = text.slice(token.start, token.end).toLowerCase();
    if (word.length <= 2 || !/^[\p{L}][\p{L}\p{N}'-]*$/u.test(word) || isStopword(word)) continue;
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return counts;
}

function normalised(weights: Map<string, number>): Map<string, number> {
  let sum = 0;
  for (const w of weights.values()) sum += w;
  const out = new Map<string, number>();
  if (sum > 0) for (const [k, w] of weights) out.set(k, w / sum);
  return out;
}

/**
 * RM3: the query's stem weights interpolated with a relevance model of the feedback chunks.
 * `docs` are the feedback chunks' stem counts with their first-pass scores; only the query's
 * stems and stems at least FEEDBACK.minShared of them hold are candidates, and `idf` discounts
 * stems common everywhere, so the model adds what the top chunks share and the rest do not.
 */
export function expandWithFeedback(
  query: Map<string, number>,
  docs: { stems: Map<string, number>; score: number }[],
  idf: (stem: string) => number,
): Map<string, number> {
  const scoreSum = docs.reduce((a, d) => a + Math.max(d.score, 0), 0);
  if (docs.length === 0 || scoreSum <= 0) return query;
  // How many feedback chunks hold each stem (a single feedback chunk has nothing to share with).
  const holders = new Map<string, number>();
  for (const doc of docs) for (const stem of doc.stems.keys()) holders.set(stem, (holders.get(stem) ?? 0) + 1);
  const minShared = Math.min(FEEDBACK.minShared, docs.length);
  const relevance = new Map<string, number>();
  for (const doc of docs) {
    let length = 0;
    for (const n of doc.stems.values()) length += n;
    if (length === 0) continue;
    const docWeight = Math.max(doc.score, 0) / scoreSum;
    for (const [stem, n] of doc.stems)
      if (query.has(stem) || (holders.get(stem) ?? 0) >= minShared)
        relevance.set(stem, (relevance.get(stem) ?? 0) + (docWeight * n) / length);
  }
  // idf reads a stem's posting list, so only the likeliest candidates pay for it.
  const candidates = [...relevance].sort((a, b) => b[1] - a[1]).slice(0, FEEDBACK.candidates);
  const best = new Map(
    candidates
      .map(([stem, r]): [string, number] => [stem, r * idf(stem)])
      .filter(([, r]) => r > 0)
      .sort((a, b) => b[1] - a[1])
      .slice(0, FEEDBACK.terms),
  );
  const original = normalised(query);
  const feedback = normalised(best);
  const lambda = feedbackLambda(original.size, feedback.size);
  const mixed = new Map<string, number>();
  for (const [stem, w] of original) mixed.set(stem, lambda * w);
  for (const [stem, w] of feedback) mixed.set(stem, (mixed.get(stem) ?? 0) + (1 - lambda) * w);
  return mixed;
}
