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

/**
 * Turns free text into an FTS5 MATCH expression: each word quoted (so no user text is read as
 * FTS5 syntax) and OR-ed, letting BM25 rank documents by how many and how rare the terms are.
 */
export function ftsQuery(text: string): string {
  const terms = new Set<string>();
  const stop = new Set<string>();
  for (const token of tokenize(text)) {
    const word = text.slice(token.start, token.end).toLowerCase();
    if (!/[\p{L}\p{N}]/u.test(word)) continue;
    (STOPWORDS.has(word) ? stop : terms).add(word);
    if (terms.size >= MAX_TERMS) break;
  }
  return [...(terms.size ? terms : stop)].map((t) => `"${t.replace(/"/g, '""')}"`).join(" OR ");
}
