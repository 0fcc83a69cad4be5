import type { Schema } from "@cfworker/json-schema";

/**
 * Type names of the simple schema form `{field: type}`: Loom's own (`string`, `integer`, ...)
 * and the hosted platform's SDK names (`int32`, `float64`, `bool`, `vec<string>`,
 * `map<string, any>`, `file`, `timestamp`, ...). Names are case-insensitive.
 */

/** A file value as every Group A encoding delivers it (a multipart part becomes this shape too). */
const FILE_VALUE: Schema = {
  type: "object",
  properties: { type: { const: "file" }, raw_bytes: { type: "string" }, metadata: { type: "object" } },
  required: ["raw_bytes"],
};

const SCALARS: Record<string, Schema> = {
  string: { type: "string" },
  str: { type: "string" },
  text: { type: "string" },
  number: { type: "number" },
  float: { type: "number" },
  float32: { type: "number" },
  float64: { type: "number" },
  integer: { type: "integer" },
  int: { type: "integer" },
  int32: { type: "integer", minimum: -2147483648, maximum: 2147483647 },
  int64: { type: "integer" },
  boolean: { type: "boolean" },
  bool: { type: "boolean" },
  object: { type: "object" },
  dict: { type: "object" },
  array: { type: "array" },
  list: { type: "array" },
  null: { type: "null" },
  none: { type: "null" },
  any: {},
  // JSON has no time type: ISO 8601 text or seconds since the epoch.
  timestamp: { type: ["string", "number"] },
  file: FILE_VALUE,
  audio: FILE_VALUE,
  image: FILE_VALUE,
};

type Generic = { arity: number; build: (args: Schema[]) => Schema | undefined };
const listOf: Generic = { arity: 1, build: ([item]) => ({ type: "array", items: item }) };
const mapOf: Generic = {
  arity: 2,
  build: ([key, value]) => (key.type === "string" ? { type: "object", additionalProperties: value } : undefined),
};

/** Generic names, how many arguments they take, and the schema they make of them. */
const GENERICS: Record<string, Generic> = {
  vec: listOf,
  list: listOf,
  array: listOf,
  map: mapOf,
  dict: mapOf,
  // The SDK's own value kinds: an enum or a stream of T carries a T here; an optional T may also be null.
  enum: { arity: 1, build: ([item]) => item },
  stream: { arity: 1, build: ([item]) => item },
  optional: { arity: 1, build: ([item]) => ({ anyOf: [item, { type: "null" }] }) },
  // `interface<Name>` names a record kind, not a type: any object will do.
  interface: { arity: 1, build: () => ({ type: "object" }) },
};

const MAX_DEPTH = 8;

/** Splits `a, map<b, c>` at the commas outside angle brackets. */
function splitArguments(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "<") depth++;
    else if (text[i] === ">") depth--;
    else if (text[i] === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

/** The JSON Schema a type name stands for, or undefined when the name is unknown. */
export function schemaForTypeName(name: string, depth = 0): Schema | undefined {
  const spelled = name.trim().toLowerCase();
  const scalar = SCALARS[spelled];
  if (scalar) return scalar;
  const generic = /^([a-z_]+)\s*<(.+)>$/.exec(spelled);
  if (!generic || depth >= MAX_DEPTH) return undefined;
  const kind = GENERICS[generic[1]];
  const parts = splitArguments(generic[2]);
  if (!kind || parts.length !== kind.arity) return undefined;
  if (generic[1] === "interface") return kind.build([]);
  const args: Schema[] = [];
  for (const part of parts) {
    const schema = schemaForTypeName(part, depth + 1);
    if (!schema) return undefined;
    args.push(schema);
  }
  return kind.build(args);
}

export const TYPE_NAMES_HELP = `${Object.keys(SCALARS).join(", ")}, vec<T>, list<T>, map<string, T>, optional<T>, enum<T>, stream<T>, interface<Name>`;
