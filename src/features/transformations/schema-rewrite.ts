import { FORMAT_PREFIX, PATTERN_FORMAT_PREFIX } from "./schema-formats";
import { isPlainObject, subschemaSlots, type SchemaObject } from "./schema-keywords";
import { compilePattern, ValidationTooCostly, type CompiledPattern, type PatternMeter } from "./schema-patterns";

/**
 * Rewrites a checked schema, for one value, into one the validator evaluates without ever
 * building a RegExp from user text, with the same meaning for that value:
 * - `pattern: P` becomes `format: "loom:pattern:<i>"` (in an `allOf` entry when the node has a
 *   format already), answered by RE2 through schema-formats.ts;
 * - `format: X` becomes `format: "loom:format:X"`, so only Loom's checks run;
 * - `patternProperties: {P: S}` becomes `properties` entries `{k: S}` for every property name k
 *   of the value that P matches (an entry `properties` already has becomes `allOf` of both).
 *   `properties` only applies to names an object has, and marks them evaluated for
 *   `additionalProperties` and `unevaluatedProperties` exactly as `patternProperties` does.
 * References stay valid: they name only the root and `$defs` / `definitions` entries, which
 * keep their places.
 */

/** Property entries the `patternProperties` rewrite may add for one value. */
export const MAX_MATCHED_PROPERTIES = 10_000;

export interface PreparedSchema {
  schema: SchemaObject | boolean;
  /** Pattern i answers format `loom:pattern:<i>`. */
  patterns: CompiledPattern[];
}

function compiled(source: string): CompiledPattern {
  const pattern = compilePattern(source);
  // Schemas are checked before they are stored and again before every run.
  if ("problem" in pattern) throw new Error(`unchecked pattern reached the validator: ${pattern.problem}`);
  return pattern;
}

/** Every distinct property name anywhere in `value`. */
function propertyNames(value: unknown): string[] {
  const names = new Set<string>();
  const stack = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (!Array.isArray(node)) for (const name of Object.keys(node)) names.add(name);
    for (const child of Object.values(node)) if (typeof child === "object" && child !== null) stack.push(child);
  }
  return [...names];
}

/** A map without a prototype, so a property named `__proto__` is a plain entry. */
function bareMap(from?: Record<string, unknown>): Record<string, unknown> {
  return Object.assign(Object.create(null) as Record<string, unknown>, from);
}

export function prepareSchema(schema: SchemaObject | boolean, value: unknown, meter: PatternMeter): PreparedSchema {
  const patterns: CompiledPattern[] = [];
  const indexes = new Map<string, number>();
  const names = propertyNames(value);
  let matched = 0;

  const patternFormat = (source: string): string => {
    let index = indexes.get(source);
    if (index === undefined) {
      index = patterns.push(compiled(source)) - 1;
      indexes.set(source, index);
    }
    return PATTERN_FORMAT_PREFIX + index;
  };

  const rewrite = (node: unknown): unknown => {
    if (!isPlainObject(node)) return node;
    const copy: SchemaObject = { ...node };
    // Fresh containers, so filling them never touches the stored schema.
    for (const slot of subschemaSlots(node)) {
      if (slot.key !== undefined && copy[slot.keyword] === node[slot.keyword]) {
        const container = node[slot.keyword];
        copy[slot.keyword] = Array.isArray(container) ? [...container] : bareMap(container as Record<string, unknown>);
      }
    }
    for (const slot of subschemaSlots(node)) {
      if (slot.keyword === "patternProperties") continue;
      const rewritten = rewrite(slot.schema);
      if (slot.key === undefined) copy[slot.keyword] = rewritten;
      else (copy[slot.keyword] as Record<string | number, unknown>)[slot.key] = rewritten;
    }
    if (typeof node.format === "string") copy.format = FORMAT_PREFIX + node.format;
    if (typeof node.pattern === "string") {
      delete copy.pattern;
      const format = patternFormat(node.pattern);
      if (copy.format === undefined) copy.format = format;
      else copy.allOf = [...(Array.isArray(copy.allOf) ? copy.allOf : []), { format }];
    }
    if (isPlainObject(node.patternProperties)) {
      delete copy.patternProperties;
      const properties = bareMap(isPlainObject(copy.properties) ? copy.properties : undefined);
      for (const [source, sub] of Object.entries(node.patternProperties)) {
        const pattern = compiled(source);
        const rewritten = rewrite(sub);
        for (const name of names) {
          if (!meter.test(pattern, name)) continue;
          matched += 1;
          if (matched > MAX_MATCHED_PROPERTIES) throw new ValidationTooCostly();
          properties[name] = name in properties ? { allOf: [properties[name], rewritten] } : rewritten;
        }
      }
      copy.properties = properties;
    }
    return copy;
  };

  return { schema: rewrite(schema) as SchemaObject | boolean, patterns };
}
