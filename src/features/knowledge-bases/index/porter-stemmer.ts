/**
 * The Porter stemmer exactly as SQLite's FTS5 `porter` tokenizer applies it (fts5_tokenize.c), for
 * one plain token: lowercase ASCII letters and digits, which the `unicode61` tokenizer under it
 * passes through unchanged as one token. Query and feedback words were stemmed by writing them into
 * a scratch FTS5 table and reading its terms back, ~5 ms a query until the object's stem cache
 * filled (and again after every eviction); this gives the same stems with no SQL. Anything else
 * (other characters, or a word the rules would cut below two letters, where FTS5 reads outside
 * its buffer) answers undefined and goes to FTS5 as before. Checked against FTS5 itself over the
 * whole Cranfield and CISI vocabularies (test/knowledge-bases/index-latency.test.ts).
 */

type Condition = (s: string, n: number) => boolean;
/** [suffix, condition on the stem left before it (null: none), replacement]. */
type Rule = readonly [string, Condition | null, string];

function isVowel(c: string, yIsVowel: boolean): boolean {
  return c === "a" || c === "e" || c === "i" || c === "o" || c === "u" || (yIsVowel && c === "y");
}

/** Past the first vowel-then-consonant run of s[from, n) (y after a consonant is a vowel): the index after it + 1, or 0. */
function gobbleVC(s: string, from: number, n: number, previousConsonant: boolean): number {
  let consonant = previousConsonant;
  let i = from;
  for (; i < n; i++) {
    consonant = !isVowel(s[i], consonant);
    if (!consonant) break;
  }
  for (i++; i < n; i++) {
    consonant = !isVowel(s[i], consonant);
    if (consonant) return i + 1;
  }
  return 0;
}

/** m > 0 over s[0, n). */
const mGt0: Condition = (s, n) => gobbleVC(s, 0, n, false) !== 0;
/** m > 1. */
const mGt1: Condition = (s, n) => {
  const first = gobbleVC(s, 0, n, false);
  return first !== 0 && gobbleVC(s, first, n, true) !== 0;
};
/** m = 1. */
const mEq1: Condition = (s, n) => {
  const first = gobbleVC(s, 0, n, false);
  return first !== 0 && gobbleVC(s, first, n, true) === 0;
};
/** *o: ends consonant-vowel-consonant, the last not w, x or y. */
const oStar: Condition = (s, n) => {
  const last = s[n - 1];
  if (last === "w" || last === "x" || last === "y") return false;
  let mask = 0;
  let consonant = false;
  for (let i = 0; i < n; i++) {
    consonant = !isVowel(s[i], consonant);
    mask = ((mask << 1) | (consonant ? 1 : 0)) & 0xff;
  }
  return (mask & 0x7) === 0x5;
};
/** *v*: holds a vowel (y counts as one past the first letter). */
const hasVowel: Condition = (s, n) => {
  for (let i = 0; i < n; i++) if (isVowel(s[i], i > 0)) return true;
  return false;
};
const mGt1AndSOrT: Condition = (s, n) => (s[n - 1] === "s" || s[n - 1] === "t") && mGt1(s, n);

const STEP2: readonly Rule[] = [
  ["ational", mGt0, "ate"],
  ["tional", mGt0, "tion"],
  ["enci", mGt0, "ence"],
  ["anci", mGt0, "ance"],
  ["izer", mGt0, "ize"],
  ["logi", mGt0, "log"],
  ["bli", mGt0, "ble"],
  ["alli", mGt0, "al"],
  ["entli", mGt0, "ent"],
  ["eli", mGt0, "e"],
  ["ousli", mGt0, "ous"],
  ["ization", mGt0, "ize"],
  ["ation", mGt0, "ate"],
  ["ator", mGt0, "ate"],
  ["alism", mGt0, "al"],
  ["iveness", mGt0, "ive"],
  ["fulness", mGt0, "ful"],
  ["ousness", mGt0, "ous"],
  ["aliti", mGt0, "al"],
  ["iviti", mGt0, "ive"],
  ["biliti", mGt0, "ble"],
];
const STEP3: readonly Rule[] = [
  ["ical", mGt0, "ic"],
  ["ness", mGt0, ""],
  ["icate", mGt0, "ic"],
  ["iciti", mGt0, "ic"],
  ["ful", mGt0, ""],
  ["ative", mGt0, ""],
  ["alize", mGt0, "al"],
];
const STEP4: readonly Rule[] = [
  ["al", mGt1, ""],
  ["ance", mGt1, ""],
  ["ence", mGt1, ""],
  ["er", mGt1, ""],
  ["ic", mGt1, ""],
  ["able", mGt1, ""],
  ["ible", mGt1, ""],
  ["ant", mGt1, ""],
  ["ement", mGt1, ""],
  ["ment", mGt1, ""],
  ["ent", mGt1, ""],
  ["ion", mGt1AndSOrT, ""],
  ["ou", mGt1, ""],
  ["ism", mGt1, ""],
  ["ate", mGt1, ""],
  ["iti", mGt1, ""],
  ["ous", mGt1, ""],
  ["ive", mGt1, ""],
  ["ize", mGt1, ""],
];
const STEP1B: readonly Rule[] = [
  ["eed", mGt0, "ee"],
  ["ed", hasVowel, ""],
  ["ing", hasVowel, ""],
];
const STEP1B2: readonly Rule[] = [
  ["at", null, "ate"],
  ["bl", null, "ble"],
  ["iz", null, "ize"],
];

/**
 * FTS5's rule tables: the first rule whose suffix ends the word (and is shorter than it) decides;
 * its condition holding, the suffix is replaced. Rules sharing a second-to-last letter keep
 * FTS5's order, which is all that order decides (FTS5 switches on that letter). Answers the new
 * word and which rule applied (-1: none).
 */
function apply(s: string, rules: readonly Rule[]): [string, number] {
  for (let r = 0; r < rules.length; r++) {
    const [suffix, condition, output] = rules[r];
    if (s.length <= suffix.length || !s.endsWith(suffix)) continue;
    const stem = s.length - suffix.length;
    if (condition && !condition(s, stem)) return [s, -1];
    return [s.slice(0, stem) + output, r];
  }
  return [s, -1];
}

/** FTS5's porter stem of a lowercase ASCII alphanumeric token, or undefined when only FTS5 can say. */
export function porterStem(word: string): string | undefined {
  if (!/^[a-z0-9]+$/.test(word)) return undefined;
  if (word.length < 3 || word.length > 64) return word;
  let s = word;
  // Step 1a.
  if (s.endsWith("s")) {
    if (s[s.length - 2] === "e") {
      const n = s.length;
      s =
        (n > 4 && s[n - 4] === "s" && s[n - 3] === "s") || (n > 3 && s[n - 3] === "i")
          ? s.slice(0, -2)
          : s.slice(0, -1);
    } else if (s[s.length - 2] !== "s") s = s.slice(0, -1);
  }
  // Step 1b: "ed" and "ing" (rules 1 and 2) go on to the clean-up.
  const [afterStep1b, rule] = apply(s, STEP1B);
  s = afterStep1b;
  if (s.length < 2) return undefined;
  if (rule >= 1) {
    const [afterTidy, tidy] = apply(s, STEP1B2);
    s = afterTidy;
    if (tidy < 0) {
      const c = s[s.length - 1];
      if (!isVowel(c, false) && c !== "l" && c !== "s" && c !== "z" && c === s[s.length - 2]) s = s.slice(0, -1);
      else if (mEq1(s, s.length) && oStar(s, s.length)) s += "e";
    }
  }
  if (s.length < 2) return undefined;
  // Step 1c.
  if (s.endsWith("y") && hasVowel(s, s.length - 1)) s = `${s.slice(0, -1)}i`;
  [s] = apply(s, STEP2);
  [s] = apply(s, STEP3);
  [s] = apply(s, STEP4);
  if (s.length < 2) return undefined;
  // Step 5a.
  if (s.endsWith("e") && (mGt1(s, s.length - 1) || (mEq1(s, s.length - 1) && !oStar(s, s.length - 1))))
    s = s.slice(0, -1);
  // Step 5b.
  if (s.length > 1 && s.endsWith("ll") && mGt1(s, s.length - 1)) s = s.slice(0, -1);
  return s;
}
