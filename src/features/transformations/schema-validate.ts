import { Validator, type OutputUnit, type Schema } from "@cfworker/json-schema";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../lib/json-depth";
import { FORMAT_PREFIX, PATTERN_FORMAT_PREFIX, withPatterns } from "./schema-formats";
import type { CompiledPattern } from "./schema-patterns";
import { PatternMeter, ValidationTooCostly } from "./schema-patterns";
import { prepareSchema } from "./schema-rewrite";
import { boundValidationWork } from "./schema-work";

/**
 * Pattern matching one validation may do, in input characters times compiled-program
 * instructions (RE2JS, with the DFA memory set in schema-patterns.ts, did 40 million or more a
 * second on state-heavy patterns in Node, so this is about half a second at worst).
 */
export const MAX_PATTERN_WORK = 20_000_000;

/** The validator's message, with Loom's internal format names turned back into what the schema said. */
function describe(unit: OutputUnit, patterns: CompiledPattern[]): string {
  if (unit.keyword !== "format") return unit.error;
  const name = unit.error.slice(unit.error.indexOf('"') + 1, unit.error.lastIndexOf('"'));
  if (name.startsWith(PATTERN_FORMAT_PREFIX))
    return `String does not match pattern ${JSON.stringify(patterns[Number(name.slice(PATTERN_FORMAT_PREFIX.length))]?.source)}.`;
  if (name.startsWith(FORMAT_PREFIX))
    return `String does not match format ${JSON.stringify(name.slice(FORMAT_PREFIX.length))}.`;
  return unit.error;
}

/**
 * Validates a value against a checked schema (see compileIoSchema); answers a sentence naming
 * the failing field, or undefined. Work is bounded whatever the schema and value: no user
 * pattern runs on a backtracking engine, and a validation that could take too long is refused
 * before it starts.
 */
export function validateAgainst(schema: Schema, value: unknown, field: "inputs" | "outputs"): string | undefined {
  const tooCostly = `${field}: checking this value against the schema would take too much work; simplify the schema or send a smaller value`;
  if (nestsDeeperThan(value, MAX_JSON_DEPTH)) return `${field} nests deeper than ${MAX_JSON_DEPTH} levels`;
  const meter = new PatternMeter(MAX_PATTERN_WORK);
  let prepared: ReturnType<typeof prepareSchema>;
  let units: OutputUnit[];
  try {
    prepared = prepareSchema(schema, value, meter);
    boundValidationWork(prepared.schema, value);
    const { patterns } = prepared;
    // Short-circuiting stops at the first failure, which keeps the error list (and work) small.
    const result = withPatterns(patterns, meter, () =>
      new Validator(prepared.schema as Schema, "2020-12", true).validate(value),
    );
    if (result.valid) return undefined;
    units = result.errors;
  } catch (error) {
    // RangeError: a stack overflow the bound did not foresee still ends as a 400, not a 500.
    if (error instanceof ValidationTooCostly || error instanceof RangeError) return tooCostly;
    throw error;
  }
  // The deepest error names the field that failed; among those, the last is the most specific
  // (a combinator's "a subschema had errors" comes before its subschema's own error).
  const deepest = units.reduce(
    (best, unit) => (unit.instanceLocation.length >= best.instanceLocation.length ? unit : best),
    units[0],
  );
  const location = deepest.instanceLocation
    .replace(/^#\/?/, "")
    .split("/")
    .filter(Boolean)
    .map(decodeURIComponent)
    .join(".");
  const where = location ? `${field}.${location}` : field;
  return `${where}: ${describe(deepest, prepared.patterns)}`;
}
