import { format as libraryFormats } from "@cfworker/json-schema";
import type { CompiledPattern, PatternMeter } from "./schema-patterns";

/**
 * String checks the validator runs through its `format` table, which is its only hook for a
 * caller's own code. Before validation every `pattern` becomes `format: "loom:pattern:<i>"`
 * and every `format: X` becomes `format: "loom:format:X"` (see schema-rewrite.ts), so the
 * validator never compiles a user pattern and never runs one of its own format regexes on user
 * text: some of those backtrack (its `url` took seconds on 30 characters).
 */

export const PATTERN_FORMAT_PREFIX = "loom:pattern:";
export const FORMAT_PREFIX = "loom:format:";
/** Distinct patterns one schema may use (`pattern` values and `patternProperties` keys). */
export const MAX_PATTERNS = 32;

/** Longest string the library's format checks are run on; every asserted format is far shorter in practice. */
const MAX_FORMAT_INPUT = 1024;

/**
 * Library checks whose regexes are anchored, bounded or split by delimiters (read by hand, and
 * fuzzed with adversarial 1,024-character strings: each under 0.1 ms in Node).
 */
const LIBRARY_CHECKED = [
  "date",
  "time",
  "date-time",
  "duration",
  "uuid",
  "ipv4",
  "ipv6",
  "email",
  "hostname",
  "json-pointer",
  "relative-json-pointer",
  "json-pointer-uri-fragment",
];

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this pattern refuses.
const NO_SPACE_OR_CONTROL = /^[^\s\u0000-\u001f\u007f]*$/u;

function parsesAsUrl(text: string, base?: string): boolean {
  // The WHATWG parser is linear; it tolerates spaces and control characters that URIs do not.
  return NO_SPACE_OR_CONTROL.test(text) && URL.canParse(text, base);
}

const OWN_CHECKS: Record<string, (text: string) => boolean> = {
  uri: (text) => parsesAsUrl(text),
  iri: (text) => parsesAsUrl(text),
  url: (text) => parsesAsUrl(text),
  "uri-reference": (text) => parsesAsUrl(text, "http://base.invalid/"),
  "iri-reference": (text) => parsesAsUrl(text, "http://base.invalid/"),
};

/** The patterns of the validation running now; validation is synchronous, so one slot is enough. */
let active: { patterns: CompiledPattern[]; meter: PatternMeter } | undefined;

function install(): void {
  for (const name of LIBRARY_CHECKED) {
    const check = libraryFormats[name];
    if (check) libraryFormats[FORMAT_PREFIX + name] = (text) => text.length <= MAX_FORMAT_INPUT && check(text);
  }
  for (const [name, check] of Object.entries(OWN_CHECKS)) libraryFormats[FORMAT_PREFIX + name] = check;
  for (let i = 0; i < MAX_PATTERNS; i++) {
    libraryFormats[PATTERN_FORMAT_PREFIX + i] = (text) => {
      const pattern = active?.patterns[i];
      if (!active || !pattern) throw new Error(`pattern ${i} checked outside a validation`);
      return active.meter.test(pattern, text);
    };
  }
}
install();

/** Runs `validate` with `patterns` answering the `loom:pattern:<i>` formats. */
export function withPatterns<T>(patterns: CompiledPattern[], meter: PatternMeter, validate: () => T): T {
  active = { patterns, meter };
  try {
    return validate();
  } finally {
    active = undefined;
  }
}

/**
 * Formats Loom asserts; others (`regex` and `uri-template` among them) are annotations, as
 * JSON Schema 2020-12 makes every format by default. `regex` would mean compiling user text.
 */
export const ASSERTED_FORMATS = [...LIBRARY_CHECKED, ...Object.keys(OWN_CHECKS)];
