import { MAX_PATTERNS } from "./schema-formats";
import {
  isPlainObject,
  LIST_KEYWORDS,
  MAP_KEYWORDS,
  slotPath,
  subschemaSlots,
  type SchemaObject,
} from "./schema-keywords";
import { compilePattern } from "./schema-patterns";
import { REF_FORMS, resolveRef } from "./schema-refs";

/**
 * The creation-time check of a user JSON Schema: its shape, and every limit that keeps
 * validating against it bounded. A schema that passes can be handed to the validator after
 * the rewrite in schema-rewrite.ts; one that fails is a 400 naming the field.
 */

/** Nesting of subschemas inside each other. */
export const MAX_SCHEMA_DEPTH = 32;
/** Subschemas in one schema. */
export const MAX_SCHEMA_NODES = 1000;
/** Longest chain of subschemas applied to one value (`$ref`, `allOf`, `not`... inside each other). */
export const MAX_IN_PLACE_CHAIN = 32;

const INSTANCE_TYPES = new Set(["array", "boolean", "integer", "null", "number", "object", "string"]);
const NUMERIC = [
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "minContains",
  "maxContains",
  "multipleOf",
];
/** Keywords that change how references resolve; the walkers here resolve only REF_FORMS. */
const UNSUPPORTED = ["$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor", "$recursiveRef"];

interface Walk {
  root: SchemaObject | boolean;
  nodes: number;
  patterns: Set<string>;
  /** Per object subschema, the subschemas applied to the same value (for the cycle check). */
  inPlace: Map<SchemaObject, unknown[]>;
}

/** Counted before compiling: each distinct pattern may cost milliseconds to compile. */
function patternProblem(source: string, walk: Walk): string | undefined {
  walk.patterns.add(source);
  if (walk.patterns.size > MAX_PATTERNS)
    return `is one too many: a schema may use at most ${MAX_PATTERNS} distinct patterns`;
  const compiled = compilePattern(source);
  return "problem" in compiled ? compiled.problem : undefined;
}

function nodeProblem(node: SchemaObject, path: string, depth: number, walk: Walk): string | undefined {
  if ("type" in node) {
    const types = Array.isArray(node.type) ? node.type : [node.type];
    for (const t of types)
      if (typeof t !== "string" || !INSTANCE_TYPES.has(t))
        return `${path}.type has an unknown type ${JSON.stringify(t)}`;
  }
  if ("required" in node && (!Array.isArray(node.required) || node.required.some((r) => typeof r !== "string")))
    return `${path}.required must be an array of property names`;
  if ("enum" in node && !Array.isArray(node.enum)) return `${path}.enum must be an array`;
  for (const key of NUMERIC)
    if (key in node && typeof node[key] !== "number" && typeof node[key] !== "boolean")
      return `${path}.${key} must be a number`;
  for (const key of UNSUPPORTED)
    if (key in node)
      return `${path}.${key} is not supported; name shared subschemas in $defs and use "$ref": "#/$defs/<name>"`;
  // The validator reads `id` as draft 4's `$id`; below the top either would move the base references resolve against.
  for (const key of ["$id", "id"]) {
    if (!(key in node)) continue;
    if (depth > 0) return `${path}.${key} is only supported at the top of the schema`;
    // A fragment would register the schema a second time under a name the validator also derives.
    if (
      typeof node[key] !== "string" ||
      (node[key] as string).includes("#") ||
      !URL.canParse(node[key] as string, "https://base.invalid/")
    )
      return `${path}.${key} must be a URI without a fragment`;
  }
  if ("format" in node && typeof node.format !== "string") return `${path}.format must be a string`;
  if ("pattern" in node) {
    if (typeof node.pattern !== "string") return `${path}.pattern must be a string`;
    const problem = patternProblem(node.pattern, walk);
    if (problem) return `${path}.pattern ${problem}`;
  }
  for (const keyword of MAP_KEYWORDS)
    if (keyword in node && !isPlainObject(node[keyword])) return `${path}.${keyword} must be an object`;
  for (const keyword of LIST_KEYWORDS)
    if (keyword in node && !Array.isArray(node[keyword])) return `${path}.${keyword} must be an array of schemas`;
  if (isPlainObject(node.patternProperties)) {
    for (const source of Object.keys(node.patternProperties)) {
      const problem = patternProblem(source, walk);
      if (problem) return `${path}.patternProperties: the pattern ${JSON.stringify(source)} ${problem}`;
    }
  }
  if ("dependentRequired" in node) {
    const map = node.dependentRequired;
    if (
      !isPlainObject(map) ||
      Object.values(map).some((names) => !Array.isArray(names) || names.some((n) => typeof n !== "string"))
    )
      return `${path}.dependentRequired must map property names to arrays of property names`;
  }
  if ("dependencies" in node) {
    if (!isPlainObject(node.dependencies)) return `${path}.dependencies must be an object`;
    for (const [name, value] of Object.entries(node.dependencies)) {
      if (Array.isArray(value) && value.some((v) => typeof v !== "string"))
        return `${path}.dependencies.${name} must be a schema or an array of property names`;
    }
  }
  const inPlace: unknown[] = [];
  if ("$ref" in node) {
    if (typeof node.$ref !== "string") return `${path}.$ref must be a string`;
    const target = resolveRef(walk.root, node.$ref);
    if (target === "unsupported") return `${path}.$ref must be ${REF_FORMS}`;
    if (target === "missing") return `${path}.$ref names no schema in this schema (${JSON.stringify(node.$ref)})`;
    inPlace.push(target);
  }
  for (const slot of subschemaSlots(node)) if (slot.kind === "in-place") inPlace.push(slot.schema);
  walk.inPlace.set(node, inPlace);
  return undefined;
}

function walkProblem(schema: unknown, path: string, depth: number, walk: Walk, topFields: boolean): string | undefined {
  if (depth > MAX_SCHEMA_DEPTH) return `${path} nests too deeply`;
  walk.nodes += 1;
  if (walk.nodes > MAX_SCHEMA_NODES) return `${path}: a schema may hold at most ${MAX_SCHEMA_NODES} subschemas`;
  if (typeof schema === "boolean") return undefined;
  if (!isPlainObject(schema)) return `${path} must be an object or a boolean`;
  const problem = nodeProblem(schema, path, depth, walk);
  if (problem) return problem;
  for (const slot of subschemaSlots(schema)) {
    // The simple form's fields are named as the user wrote them (`inputs.x`), not `inputs.properties.x`.
    const childPath = topFields && slot.keyword === "properties" ? `${path}.${slot.key}` : slotPath(path, slot);
    const childProblem = walkProblem(slot.schema, childPath, depth + 1, walk, false);
    if (childProblem) return childProblem;
  }
  return undefined;
}

/**
 * Longest chain of subschemas applied to one value, or Infinity when one leads back to itself
 * (`{"$ref": "#"}`): validating would then recurse without consuming the value, forever.
 */
function longestInPlaceChain(walk: Walk): number {
  const done = new Map<SchemaObject, number>();
  const onPath = new Set<SchemaObject>();
  const lengthFrom = (node: unknown, depth: number): number => {
    if (!isPlainObject(node)) return 0;
    // Past the limit the answer is "too long" whatever follows, so the recursion stays shallow.
    if (depth > MAX_IN_PLACE_CHAIN) return MAX_IN_PLACE_CHAIN + 1;
    const known = done.get(node);
    if (known !== undefined) return known;
    if (onPath.has(node)) return Infinity;
    onPath.add(node);
    let longest = 0;
    for (const next of walk.inPlace.get(node) ?? []) {
      longest = Math.max(longest, lengthFrom(next, depth + 1));
      if (longest > MAX_IN_PLACE_CHAIN) break;
    }
    onPath.delete(node);
    done.set(node, longest + 1);
    return longest + 1;
  };
  let longest = 0;
  for (const node of walk.inPlace.keys()) {
    longest = Math.max(longest, lengthFrom(node, 0));
    if (longest > MAX_IN_PLACE_CHAIN) break;
  }
  return longest;
}

/**
 * Returns the first problem of a JSON Schema, naming its place under `field`, or undefined.
 * `topFields`: the schema is the simple form's wrapper, whose properties are the user's fields.
 */
export function schemaProblem(schema: SchemaObject | boolean, field: string, topFields = false): string | undefined {
  const walk: Walk = { root: schema, nodes: 0, patterns: new Set(), inPlace: new Map() };
  const problem = walkProblem(schema, field, 0, walk, topFields);
  if (problem) return problem;
  const chain = longestInPlaceChain(walk);
  if (chain === Infinity)
    return `${field}: a $ref leads back to itself without descending into the value (as {"$ref": "#"} does), so it could never be checked`;
  if (chain > MAX_IN_PLACE_CHAIN)
    return `${field}: more than ${MAX_IN_PLACE_CHAIN} subschemas apply to one value through $ref and combinators`;
  return undefined;
}
