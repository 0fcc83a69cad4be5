import { contentTerms, isStopword, stem, words } from "./text";

/** One feedback document: a top-ranked result of the first retrieval, with its score. */
export interface FeedbackDocument {
  text: string;
  score: number;
}

export interface ExpansionOptions {
  /** Feedback documents used (the top k of the first retrieval). */
  feedbackDocs?: number;
  /** Expansion terms added. */
  terms?: number;
  /** RM3's weight on the original query (the rest goes to the feedback model). */
  originalWeight?: number;
  /** Collection statistics; with them, terms common everywhere are discounted (idf). */
  collection?: { documentCount: number; documentFrequency: (term: string) => number };
}

export interface Expansion {
  /** The original query followed by the added terms: what a keyword search runs. */
  query: string;
  /** Weighted terms of the RM3 model, best first (original terms included). */
  weighted: { term: string; weight: number }[];
  /** Only the words that were added. */
  added: string[];
}

export const PRF_DEFAULTS = { feedbackDocs: 5, terms: 8, originalWeight: 0.6 } as const;

/**
 * Pseudo-relevance feedback in the RM3 style: assume the top documents of a first retrieval are
 * relevant, build a term model from them (each document's term frequencies weighted by its
 * normalised score), interpolate it with the query's own terms, and add the strongest new terms.
 * Offline and model-free; whether it helps is measured on Cranfield by `npm run eval:prf`.
 */
export function expandQuery(query: string, feedback: FeedbackDocument[], options: ExpansionOptions = {}): Expansion {
  const k = options.feedbackDocs ?? PRF_DEFAULTS.feedbackDocs;
  const termCount = options.terms ?? PRF_DEFAULTS.terms;
  const lambda = options.originalWeight ?? PRF_DEFAULTS.originalWeight;
  const docs = feedback.slice(0, k);
  const queryTerms = contentTerms(query);
  const original = new Map<string, number>();
  for (const term of queryTerms) original.set(term, (original.get(term) ?? 0) + 1 / queryTerms.length);

  // Scores from BM25 or fused lists are on arbitrary scales: shift to positive, then normalise.
  const minScore = Math.min(...docs.map((d) => d.score), 0);
  const shifted = docs.map((d) => d.score - minScore + 1e-6);
  const total = shifted.reduce((a, b) => a + b, 0) || 1;

  // Keep one surface form per stem, so the added words read as words ("wings" rather than "wing").
  const surface = new Map<string, Map<string, number>>();
  const relevance = new Map<string, number>();
  docs.forEach((doc, i) => {
    const tokens = words(doc.text).filter((w) => w.length > 2 && !isStopword(w) && !/^\d+$/.test(w));
    if (tokens.length === 0) return;
    const docWeight = (shifted[i] ?? 0) / total;
    const tf = new Map<string, number>();
    for (const token of tokens) {
      const s = stem(token);
      tf.set(s, (tf.get(s) ?? 0) + 1);
      const forms = surface.get(s) ?? new Map<string, number>();
      forms.set(token, (forms.get(token) ?? 0) + 1);
      surface.set(s, forms);
    }
    for (const [term, count] of tf)
      relevance.set(term, (relevance.get(term) ?? 0) + docWeight * (count / tokens.length));
  });
  if (options.collection) {
    const { documentCount, documentFrequency } = options.collection;
    for (const [term, weight] of relevance)
      relevance.set(term, weight * Math.log(1 + documentCount / (1 + documentFrequency(term))));
    const sum = [...relevance.values()].reduce((a, b) => a + b, 0) || 1;
    for (const [term, weight] of relevance) relevance.set(term, weight / sum);
  }

  const feedbackTerms = [...relevance.entries()].sort((a, b) => b[1] - a[1]).slice(0, termCount * 3);
  const feedbackSum = feedbackTerms.reduce((a, [, w]) => a + w, 0) || 1;
  const combined = new Map<string, number>();
  for (const [term, weight] of original) combined.set(term, lambda * weight);
  for (const [term, weight] of feedbackTerms)
    combined.set(term, (combined.get(term) ?? 0) + (1 - lambda) * (weight / feedbackSum));
  const weighted = [...combined.entries()]
    .map(([term, weight]) => ({ term, weight }))
    .sort((a, b) => b.weight - a.weight);

  const added: string[] = [];
  for (const { term } of weighted) {
    if (original.has(term) || added.length >= termCount) continue;
    const forms = surface.get(term);
    const form = forms ? [...forms.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] : undefined;
    added.push(form ?? term);
  }
  return { query: added.length ? `${query.trim()} ${added.join(" ")}` : query.trim(), weighted, added };
}
