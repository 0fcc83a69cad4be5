import { tokenize } from "./chunker";

/**
 * English function words carry almost no BM25 weight but match most chunks, so scoring them costs
 * time for nothing; they are left out of the MATCH expression (unless a query has nothing else).
 */
const STOPWORDS = new Set(
  "a about above after again against all am an and any are as at be because been before being below between both but by can could did do does doing down during each few for from further had has have having he her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such than that the their theirs them themselves then there these they this those through to too under until up very was we were what when where which while who whom why will with would you your yours yourself yourselves".split(" "),
);

/** Most queries need no more; longer texts are cut so a query stays cheap. */
const MAX_TERMS = 64;

/** The distinct search terms of a text, lowercased, function words left out when others exist. */
export function queryTerms(text: string): string[] {
  const terms = new Set<string>();
  const stop = new Set<string>();
  for (const token of tokenize(text)) {
    const word = text.slice(token.start, token.end).toLowerCase();
    if (!/[\p{L}\p{N}]/u.test(word)) continue;
    (STOPWORDS.has(word) ? stop : terms).add(word);
    if (terms.size >= MAX_TERMS) break;
  }
  return [...(terms.size ? terms : stop)];
}

/**
 * An FTS5 MATCH expression: each term quoted (so no user text is read as FTS5 syntax) and OR-ed,
 * letting BM25 rank chunks by how many and how rare the terms they hold are.
 */
export function matchExpression(terms: string[]): string {
  return terms.map((t) => `"${t.replace(/"/g, '""')}"`).join(" OR ");
}

/**
 * At most this many terms reach BM25: the rarest ones, which carry nearly all of its weight (a
 * pasted paragraph would otherwise score every chunk). Measured on Cranfield: capping at 12 and
 * leaving function words out raised keyword nDCG@10 from 0.361 to 0.369 (BENCHMARKS.md).
 */
export const MAX_SCORED_TERMS = 12;

/** The terms worth scoring: all of them when few, else the MAX_SCORED_TERMS rarest present. */
export function selectTerms(terms: string[], frequency: (term: string) => number): string[] {
  if (terms.length <= MAX_SCORED_TERMS) return terms;
  const present = terms.map((t) => ({ t, df: frequency(t) })).filter((x) => x.df > 0);
  present.sort((a, b) => a.df - b.df);
  return present.slice(0, MAX_SCORED_TERMS).map((x) => x.t);
}
