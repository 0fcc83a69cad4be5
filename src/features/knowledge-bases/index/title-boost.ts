/**
 * A title field for the keyword side, read at query time. A document's first line, when it is
 * short and a blank line follows it (a paper's title, a Markdown heading, a page's name), says
 * what the whole document is about: a query term found there is worth more than one found in
 * passing (BM25F's field weights; titles are the classic example). The index has one text field,
 * so the boost is applied to the top of the BM25 ranking only, where it decides the order.
 * Measured in `npm run eval:retrieval` (BENCHMARKS.md).
 */
export const TITLE_BOOST = {
  /** Weight of a query term in the title, as a share of its idf-weighted query weight. */
  weight: 0.5,
  /** Top chunks of the BM25 ranking that are re-ranked (the rest keep their order below them). */
  rerank: 50,
  /** A first line longer than this many words is a paragraph, not a title. */
  maxWords: 30,
} as const;

/** The title of a chunk's text: the first line of a document's first chunk, when short and followed by a blank line. */
export function leadingTitle(text: string, position: number): string | undefined {
  if (position !== 0) return undefined;
  const match = /^[ \t]*([^\n]*\S)[ \t]*\r?\n[ \t]*\r?\n/.exec(text);
  if (!match) return undefined;
  const title = match[1].replace(/^#+\s*/, "");
  const words = title.split(/\s+/).filter(Boolean).length;
  return words > 0 && words <= TITLE_BOOST.maxWords ? title : undefined;
}

/**
 * Adds to each hit's score, for the query stems its title holds, weight x query weight x idf,
 * and re-sorts the re-ranked head (the tail keeps its order, below).
 */
export function boostTitles<K>(
  hits: { id: K; score: number }[],
  titleStems: (id: K) => Iterable<string> | undefined,
  query: Map<string, number>,
  idf: (stem: string) => number,
): { id: K; score: number }[] {
  const head = hits.slice(0, TITLE_BOOST.rerank).map((hit) => {
    let bonus = 0;
    for (const stem of new Set(titleStems(hit.id) ?? [])) {
      const weight = query.get(stem);
      if (weight && weight > 0) bonus += weight * idf(stem);
    }
    return bonus > 0 ? { id: hit.id, score: hit.score + TITLE_BOOST.weight * bonus } : hit;
  });
  head.sort((a, b) => b.score - a.score);
  return [...head, ...hits.slice(TITLE_BOOST.rerank)];
}
