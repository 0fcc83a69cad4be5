/** Small text tools shared by the offline built-ins: tokens, stopwords, sentences. */

const STOPWORDS = new Set(
  (
    "a about above after again against all am an and any are as at be because been before being below between both but by can could did do does doing down " +
    "during each few for from further had has have having he her here hers herself him himself his how i if in into is it its itself just me more most my " +
    "myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such than that the their theirs them " +
    "themselves then there these they this those through to too under until up very was we were what when where which while who whom why will with would " +
    "you your yours yourself yourselves also may might must shall upon via etc using used use made make given obtained found shown show shows based within " +
    "without however thus therefore well many much one two three new several various per among whether either neither onto"
  ).split(" "),
);

export function isStopword(term: string): boolean {
  return STOPWORDS.has(term);
}

/** Lowercased words and numbers; punctuation dropped. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu) ?? [];
}

/** A light suffix stripper (plural and common verb endings), so "wings" meets "wing". */
export function stem(word: string): string {
  if (word.length <= 3) return word;
  if (word.endsWith("ies") && word.length > 4) return `${word.slice(0, -3)}y`;
  if (word.endsWith("sses")) return word.slice(0, -2);
  if (word.endsWith("ing") && word.length > 5) return word.slice(0, -3);
  if (word.endsWith("ed") && word.length > 4) return word.slice(0, -2);
  if (word.endsWith("s") && !word.endsWith("ss") && !word.endsWith("us") && !word.endsWith("is"))
    return word.slice(0, -1);
  return word;
}

/** Content terms: words minus stopwords and one-letter tokens, stemmed. */
export function contentTerms(text: string): string[] {
  return words(text)
    .filter((w) => w.length > 1 && !STOPWORDS.has(w))
    .map(stem);
}

const ABBREVIATIONS = /(?:\b(?:e\.g|i\.e|etc|vs|fig|eq|ref|no|dr|mr|mrs|ms|prof|st|al|approx|cf)|\b\p{L})\.$/iu;

/** Sentences, split after . ! ? or blank lines, without breaking after abbreviations like "e.g.". */
export function sentences(text: string): string[] {
  const pieces = text.split(/(?<=[.!?])\s+|\n\s*\n/u);
  const out: string[] = [];
  let carry = "";
  for (const piece of pieces) {
    const joined = carry ? `${carry} ${piece}` : piece;
    if (ABBREVIATIONS.test(joined.trim())) {
      carry = joined;
      continue;
    }
    carry = "";
    const clean = joined.replace(/\s+/g, " ").trim();
    if (clean) out.push(clean);
  }
  const rest = carry.replace(/\s+/g, " ").trim();
  if (rest) out.push(rest);
  return out;
}
