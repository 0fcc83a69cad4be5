import { tokenize } from "./chunker";

/** Most queries need no more; longer texts are cut so a query stays cheap. */
const MAX_TERMS = 64;

/**
 * Turns free text into an FTS5 MATCH expression: each word quoted (so no user text is read as
 * FTS5 syntax) and OR-ed, letting BM25 rank documents by how many and how rare the terms are.
 */
export function ftsQuery(text: string): string {
  const terms = new Set<string>();
  for (const token of tokenize(text)) {
    const word = text.slice(token.start, token.end);
    if (!/[\p{L}\p{N}]/u.test(word)) continue;
    terms.add(word.toLowerCase());
    if (terms.size >= MAX_TERMS) break;
  }
  return [...terms].map((t) => `"${t.replace(/"/g, '""')}"`).join(" OR ");
}
