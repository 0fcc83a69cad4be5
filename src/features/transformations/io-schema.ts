import { Validator, type Schema } from "@cfworker/json-schema";
import { schemaForTypeName, TYPE_NAMES_HELP } from "./io-type-names";

/**
 * Transformation input and output schemas. Two spellings are accepted:
 * - JSON Schema (an object with `type: "object"`, `properties`, `$schema`, `required`, a
 *   combinator or a `$ref` at the top), checked for shape on creation;
 * - the hosted platform's simple form, `{field: type}` (or `{field: {io_type: type}}`, as its
 *   SDK describes pipeline and agent inputs), with the type names of io-type-names.ts; every
 *   field it names is required.
 * `{}` accepts any object.
 */
export type IoSchema = Record<string, unknown>;

const INSTANCE_TYPES = new Set(["array", "boolean", "integer", "null", "number", "object", "string"]);
const SCHEMA_MARKERS = ["$schema", "properties", "required", "additionalProperties", "allOf", "anyOf", "oneOf", "not", "$ref", "$defs", "definitions", "patternProperties"];
const SUBSCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const SUBSCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SUBSCHEMA_SINGLE = ["additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems"];

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function looksLikeJsonSchema(schema: IoSchema): boolean {
  return schema.type === "object" || SCHEMA_MARKERS.some((key) => key in schema);
}

/** Returns the first structural problem of a JSON Schema, or undefined. */
function schemaProblem(schema: unknown, path: string, depth = 0): string | undefined {
  if (depth > 32) return `${path} nests too deeply`;
  if (typeof schema === "boolean") return undefined;
  if (!isPlainObject(schema)) return `${path} must be an object or a boolean`;
  if ("type" in schema) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    for (const t of types) if (typeof t !== "string" || !INSTANCE_TYPES.has(t)) return `${path}.type has an unknown type ${JSON.stringify(t)}`;
  }
  if ("required" in schema && (!Array.isArray(schema.required) || schema.required.some((r) => typeof r !== "string"))) return `${path}.required must be an array of property names`;
  if ("enum" in schema && !Array.isArray(schema.enum)) return `${path}.enum must be an array`;
  for (const key of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "multipleOf"]) {
    if (key in schema && typeof schema[key] !== "number" && typeof schema[key] !== "boolean") return `${path}.${key} must be a number`;
  }
  if ("pattern" in schema) {
    if (typeof schema.pattern !== "string") return `${path}.pattern must be a string`;
    try {
      new RegExp(schema.pattern, "u");
    } catch {
      return `${path}.pattern is not a valid regular expression`;
    }
  }
  for (const key of SUBSCHEMA_MAPS) {
    if (!(key in schema)) continue;
    const map = schema[key];
    if (!isPlainObject(map)) return `${path}.${key} must be an object`;
    for (const [name, sub] of Object.entries(map)) {
      const problem = schemaProblem(sub, `${path}.${key}.${name}`, depth + 1);
      if (problem) return problem;
    }
  }
  for (const key of SUBSCHEMA_LISTS) {
    if (!(key in schema)) continue;
    const list = schema[key];
    if (!Array.isArray(list)) return `${path}.${key} must be an array of schemas`;
    for (const [i, sub] of list.entries()) {
      const problem = schemaProblem(sub, `${path}.${key}.${i}`, depth + 1);
      if (problem) return problem;
    }
  }
  for (const key of SUBSCHEMA_SINGLE) {
    if (!(key in schema)) continue;
    const sub = schema[key];
    const subs = key === "items" && Array.isArray(sub) ? sub : [sub];
    for (const one of subs) {
      const problem = schemaProblem(one, `${path}.${key}`, depth + 1);
      if (problem) return problem;
    }
  }
  return undefined;
}

/**
 * Turns either spelling into a JSON Schema for an object, or explains (naming `field`) why
 * it is neither. Pure: used on creation (to refuse bad schemas) and on every run.
 */
export function compileIoSchema(schema: IoSchema, field: string): { schema: Schema } | { problem: string } {
  if (Object.keys(schema).length === 0) return { schema: { type: "object" } };
  if (looksLikeJsonSchema(schema)) {
    const problem = schemaProblem(schema, field);
    if (problem) return { problem: `${problem}` };
    if ("type" in schema && schema.type !== "object") return { problem: `${field} must describe an object (type "object")` };
    return { schema: schema as Schema };
  }
  const properties: Record<string, Schema> = {};
  for (const [name, type] of Object.entries(schema)) {
    const named = typeof type === "string" ? type : isPlainObject(type) && typeof type.io_type === "string" ? type.io_type : undefined;
    const spelled = named === undefined ? undefined : schemaForTypeName(named);
    if (!spelled) {
      if (named === undefined && isPlainObject(type)) {
        const problem = schemaProblem(type, `${field}.${name}`);
        if (problem) return { problem };
        properties[name] = type as Schema;
        continue;
      }
      return { problem: `${field}.${name} has an unknown type ${JSON.stringify(named ?? type).slice(0, 200)} (use a JSON Schema or one of ${TYPE_NAMES_HELP})` };
    }
    properties[name] = spelled;
  }
  return { schema: { type: "object", properties, required: Object.keys(properties) } };
}

/** Validates a value against a compiled schema; answers a sentence naming the failing field, or undefined. */
export function validateAgainst(schema: Schema, value: unknown, field: "inputs" | "outputs"): string | undefined {
  const result = new Validator(schema, "2020-12", false).validate(value);
  if (result.valid) return undefined;
  // The deepest error names the field that failed; the outer ones only say "does not match".
  const deepest = result.errors.reduce((best, unit) => (unit.instanceLocation.length > best.instanceLocation.length ? unit : best), result.errors[0]);
  const location = deepest.instanceLocation.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent).join(".");
  const where = location ? `${field}.${location}` : field;
  return `${where}: ${deepest.error}`;
}
