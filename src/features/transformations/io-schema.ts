import type { Schema } from "@cfworker/json-schema";
import { schemaProblem } from "./schema-check";
import { isPlainObject } from "./schema-keywords";
import { schemaForTypeName, TYPE_NAMES_HELP } from "./io-type-names";

/**
 * Transformation input and output schemas. Two spellings are accepted:
 * - JSON Schema (an object with `type: "object"`, `properties`, `$schema`, `required`, a
 *   combinator or a `$ref` at the top), checked on creation and before every run for its shape
 *   and for the limits that keep validating against it bounded (schema-check.ts);
 * - the hosted platform's simple form, `{field: type}` (or `{field: {io_type: type}}`, as its
 *   SDK describes pipeline and agent inputs), with the type names of io-type-names.ts; every
 *   field it names is required.
 * `{}` accepts any object.
 */
export type IoSchema = Record<string, unknown>;

const SCHEMA_MARKERS = [
  "$schema",
  "properties",
  "required",
  "additionalProperties",
  "allOf",
  "anyOf",
  "oneOf",
  "not",
  "$ref",
  "$defs",
  "definitions",
  "patternProperties",
];

function looksLikeJsonSchema(schema: IoSchema): boolean {
  return schema.type === "object" || SCHEMA_MARKERS.some((key) => key in schema);
}

/**
 * Turns either spelling into a JSON Schema for an object, or explains (naming `field`) why
 * it is neither. Pure: used on creation (to refuse bad schemas) and on every run.
 */
export function compileIoSchema(schema: IoSchema, field: string): { schema: Schema } | { problem: string } {
  if (Object.keys(schema).length === 0) return { schema: { type: "object" } };
  if (looksLikeJsonSchema(schema)) {
    const problem = schemaProblem(schema, field);
    if (problem) return { problem };
    if ("type" in schema && schema.type !== "object")
      return { problem: `${field} must describe an object (type "object")` };
    return { schema: schema as Schema };
  }
  // No prototype: a field named `__proto__` must be a field, not a change of prototype.
  const properties = Object.create(null) as Record<string, Schema>;
  for (const [name, type] of Object.entries(schema)) {
    const named =
      typeof type === "string"
        ? type
        : isPlainObject(type) && typeof type.io_type === "string"
          ? type.io_type
          : undefined;
    const spelled = named === undefined ? undefined : schemaForTypeName(named);
    if (spelled) properties[name] = spelled;
    else if (named === undefined && isPlainObject(type)) properties[name] = type as Schema;
    else
      return {
        problem: `${field}.${name} has an unknown type ${JSON.stringify(named ?? type).slice(0, 200)} (use a JSON Schema or one of ${TYPE_NAMES_HELP})`,
      };
  }
  const wrapped: Schema = { type: "object", properties, required: Object.keys(properties) };
  // Checked as a whole, so a field's `$ref` resolves against the schema the validator will see.
  const problem = schemaProblem(wrapped as Record<string, unknown>, field, true);
  return problem ? { problem } : { schema: wrapped };
}
