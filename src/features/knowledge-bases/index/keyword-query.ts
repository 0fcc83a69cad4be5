import { tokenize } from "../chunker";

/**
 * English function words carry almost no BM25 weight but match most chunks, so scoring them costs
 * time for nothing; they are left out of the MATCH expression (unless a query has nothing else).
 */
const STOPWORDS = new Set(
  "a about above after again against all am an and any are as at be because been before being below between both but by can could did do does doing down during each few for from further had has have having he her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such than that the their theirs them themselves then there these they this those through to too under until up very was we were what when where which while who whom why will with would you your yours yourself yourselves".split(
    " ",
  ),
);

/**
 * The words a request is phrased with rather than what it asks about ("Describe papers on ...",
 * "Has anyone investigated ...", "I am interested in papers dealing with ..."). Documents seldom
 * hold them, so BM25 gives them a high idf and ranks first a chunk that happens to say "anyone" or
 * "papers". Left out of a query's terms when it has others (query side only: a query made of
 * nothing else still searches them); the verbose-query literature calls this stop structure.
 */
const REQUEST_WORDS = new Set(
  "anyone anybody anything available want wanted wants wish interested looking please tell give paper papers describe describes describing described discuss discusses discussing discussed deal deals dealing concerning regarding pertaining particularly especially specifically also etc".split(
    " ",
  ),
);

/** What follows the apostrophe of "I'd", "user's", "don't", "we've": a function word's fragment, not a term. */
const CONTRACTIONS = new Set(["s", "t", "d", "m", "ll", "re", "ve"]);

/** Whether a word is a contraction's fragment: one of those, right after an apostrophe ("vitamin D" stays a term). */
function isContraction(text: string, start: number, word: string): boolean {
  return CONTRACTIONS.has(word) && start > 0 && (text[start - 1] === "'" || text[start - 1] === "\u2019");
}

/** Most queries need no more; longer texts are cut so a query stays cheap. */
const MAX_TERMS = 64;

type WordKind = "stop" | "request" | "term";

/** A query's words, each a function word (or a contraction's fragment), a request word or a search term. */
function* classifiedWords(query: string): Generator<{ word: string; original: string; kind: WordKind }> {
  // "e.g." and "i.e." are no terms, but "vitamin E" is: drop the abbreviations, not the letters.
  const text = query.replace(/\b(?:e\.g|i\.e)\./gi, (m) => " ".repeat(m.length));
  for (const token of tokenize(text)) {
    const original = text.slice(token.start, token.end);
    const word = original.toLowerCase();
    if (!/[\p{L}\p{N}]/u.test(word)) continue;
    const kind: WordKind =
      STOPWORDS.has(word) || isContraction(text, token.start, word)
        ? "stop"
        : REQUEST_WORDS.has(word)
          ? "request"
          : "term";
    yield { word, original, kind };
  }
}

/**
 * The search terms of a text, lowercased, each with how often it occurs (function words left out
 * when others exist). The count matters for long natural-language queries, which name what they
 * are about more than once ("titles ... titles ... titles"): BM25 weighs each term by it.
 */
export function queryTermCounts(query: string): Map<string, number> {
  const terms = new Map<string, number>();
  const request = new Map<string, number>();
  const stop = new Map<string, number>();
  for (const { word, kind } of classifiedWords(query)) {
    const into = kind === "stop" ? stop : kind === "request" ? request : terms;
    if (!into.has(word) && terms.size >= MAX_TERMS) continue;
    into.set(word, (into.get(word) ?? 0) + 1);
  }
  return terms.size ? terms : request.size ? request : stop;
}

/**
 * The query as a bag-of-words embedder should read it (Embedder.orderFree): its search terms in
 * order and in their own case, without the function and request words around them. Such a model
 * averages every word it is given, so in a long request the many "what", "is", "papers" drowned
 * the few words that say what is asked (vector-only nDCG@10 on CISI 0.252 -> 0.281, BENCHMARKS.md).
 * The text itself when it has no search term.
 */
export function embeddingText(query: string): string {
  const kept: string[] = [];
  for (const { original, kind } of classifiedWords(query)) if (kind === "term") kept.push(original);
  return kept.length ? kept.join(" ") : query;
}

/** The distinct search terms of a text, lowercased, function words left out when others exist. */
export function queryTerms(text: string): string[] {
  return [...queryTermCounts(text).keys()];
}

/** Whether a lowercased word is an English function word (left out of queries and feedback terms). */
export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
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
 * pasted paragraph would otherwise score every chunk). 12 suited Cranfield's short queries but cut
 * the long natural-language ones of CISI (a 40-word request lost most of what it asks for); 32
 * keeps them whole and still bounds a pasted page (BENCHMARKS.md).
 */
export const MAX_SCORED_TERMS = 32;

/** The terms worth scoring: all of them when few, else the MAX_SCORED_TERMS rarest present. */
export function selectTerms(terms: string[], frequency: (term: string) => number): string[] {
  if (terms.length <= MAX_SCORED_TERMS) return terms;
  const present = terms.map((t) => ({ t, df: frequency(t) })).filter((x) => x.df > 0);
  present.sort((a, b) => a.df - b.df);
  return present.slice(0, MAX_SCORED_TERMS).map((x) => x.t);
}
