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
  /** The query's own share of the mixed weights (RM3's lambda). */
  originalWeight: 0.5,
} as const;

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
 * `docs` are the feedback chunks' stem counts with their first-pass scores; `idf` discounts
 * stems common everywhere, so the model adds what the top chunks share and the rest do not.
 */
export function expandWithFeedback(
  query: Map<string, number>,
  docs: { stems: Map<string, number>; score: number }[],
  idf: (stem: string) => number,
): Map<string, number> {
  const scoreSum = docs.reduce((a, d) => a + Math.max(d.score, 0), 0);
  if (docs.length === 0 || scoreSum <= 0) return query;
  const relevance = new Map<string, number>();
  for (const doc of docs) {
    let length = 0;
    for (const n of doc.stems.values()) length += n;
    if (length === 0) continue;
    const docWeight = Math.max(doc.score, 0) / scoreSum;
    for (const [stem, n] of doc.stems) relevance.set(stem, (relevance.get(stem) ?? 0) + (docWeight * n) / length);
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
  const lambda = FEEDBACK.originalWeight;
  const mixed = new Map<string, number>();
  for (const [stem, w] of original) mixed.set(stem, lambda * w);
  for (const [stem, w] of feedback) mixed.set(stem, (mixed.get(stem) ?? 0) + (1 - lambda) * w);
  return mixed;
}
