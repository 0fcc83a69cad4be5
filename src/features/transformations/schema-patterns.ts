import { RE2JS, RE2JSSyntaxException } from "re2js";
import { estimatedProgramSize } from "./pattern-size";

/**
 * Regular expressions from user schemas (`pattern`, `patternProperties` keys, strings checked
 * for `format: "regex"`) run on RE2JS, a port of RE2 that matches in time linear in the input
 * (times the size of the compiled program), never on the engine's backtracking RegExp: with
 * RegExp, `^(a+)+$` against 30 characters took seconds, doubling with each character.
 */

/** Longest pattern accepted, in characters. */
export const MAX_PATTERN_CHARS = 1000;
/** Largest compiled program accepted, in RE2 instructions (`a{1000}` alone is a thousand). */
export const MAX_PATTERN_INSTRUCTIONS = 2000;
/** The text-based estimate overcounts nested repetition, so it gets room before a pattern is refused uncompiled. */
const MAX_ESTIMATED_INSTRUCTIONS = 3 * MAX_PATTERN_INSTRUCTIONS;
const TOO_LARGE = `is too large once its repetitions are expanded (at most ${MAX_PATTERN_INSTRUCTIONS} RE2 instructions); use smaller repetition counts`;

export interface CompiledPattern {
  source: string;
  regex: RE2JS;
  /** Instructions in the compiled program: matching costs about this much per input character. */
  size: number;
}

/** True when `source` has a named backreference (`\k<name>`): the translation to RE2 syntax would quietly make it literal text. */
function hasNamedBackreference(source: string): boolean {
  for (let i = 0; i < source.length; i++) {
    if (source[i] !== "\\") continue;
    if (source[i + 1] === "k") return true;
    i += 1;
  }
  return false;
}

const UNSUPPORTED = "uses syntax Loom does not run (patterns are RE2: no lookarounds or backreferences)";

/**
 * Memory one pattern's lazily built DFA may hold before it starts over (RE2JS's default is
 * 8 MiB, which a schema's worth of patterns, kept in the cache below, could turn into more
 * than an isolate has).
 */
const DFA_MEMORY_BYTES = 256 * 1024;

const cache = new Map<string, CompiledPattern>();
const CACHE_ENTRIES = 64;

/**
 * Compiles an ECMAScript-syntax pattern (as JSON Schema specifies) for RE2, or explains why it
 * cannot run in linear time. Lookarounds and backreferences have no linear-time algorithm and
 * are refused, as are patterns whose program is larger than MAX_PATTERN_INSTRUCTIONS.
 */
export function compilePattern(source: string): CompiledPattern | { problem: string } {
  const known = cache.get(source);
  if (known) return known;
  if (source.length > MAX_PATTERN_CHARS) return { problem: `is longer than ${MAX_PATTERN_CHARS} characters` };
  if (hasNamedBackreference(source)) return { problem: `${UNSUPPORTED}: \\k` };
  // Compiling costs more than linear time in the program size: measure before compiling.
  if (estimatedProgramSize(source) > MAX_ESTIMATED_INSTRUCTIONS) return { problem: TOO_LARGE };
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(RE2JS.translateRegExp(source));
  } catch (error) {
    if (!(error instanceof RE2JSSyntaxException)) throw error;
    const unsupported = /unsupported|invalid escape|invalid named capture/i.test(error.message);
    return { problem: unsupported ? `${UNSUPPORTED}: ${error.message}` : "is not a valid regular expression" };
  }
  // The program is not part of RE2JS's typed surface; its size is what bounds matching work.
  const size = (regex.re2().prog as { numInst(): number }).numInst();
  if (size > MAX_PATTERN_INSTRUCTIONS) return { problem: TOO_LARGE };
  const dfa = regex.re2().dfa;
  dfa.maxMem = dfa.stateBudget = dfa.memBudget = DFA_MEMORY_BYTES;
  const compiled = { source, regex, size };
  if (cache.size >= CACHE_ENTRIES) cache.clear();
  cache.set(source, compiled);
  return compiled;
}

/** Thrown when a validation would pass its work budget; the caller answers a 400. */
export class ValidationTooCostly extends Error {
  constructor() {
    super("validation work budget exceeded");
    this.name = "ValidationTooCostly";
  }
}

/**
 * Tests strings against patterns for one validation, charging each distinct test its input
 * length times the program size against a budget, so the total matching work of a request is
 * bounded whatever the schema and the value. Results are remembered: the validator may test
 * one string against one pattern many times (combinators, `$ref`).
 */
export class PatternMeter {
  private readonly seen = new Map<CompiledPattern, Map<string, boolean>>();
  private spent = 0;

  constructor(private readonly budget: number) {}

  /** True when `pattern` matches somewhere in `text` (JSON Schema patterns are not anchored). */
  test(pattern: CompiledPattern, text: string): boolean {
    let results = this.seen.get(pattern);
    if (!results) {
      results = new Map();
      this.seen.set(pattern, results);
    }
    const known = results.get(text);
    if (known !== undefined) return known;
    this.spent += (text.length + 1) * pattern.size;
    if (this.spent > this.budget) throw new ValidationTooCostly();
    const matched = pattern.regex.test(text);
    results.set(text, matched);
    return matched;
  }
}
