import fc from "fast-check";
import { Validator, type Schema } from "@cfworker/json-schema";

/**
 * Hostile field values for the body sweep (hostile-bodies.test.ts), and the walk over the OpenAPI
 * document that finds every body field. Values are kept as raw JSON text so that shapes a JS object
 * literal cannot hold survive: own `__proto__` keys, 10,000 levels of nesting, 1e400.
 */

export type JsonSchema = Record<string, unknown>;
interface Operation {
  requestBody?: { content: Record<string, { schema: JsonSchema }> };
}
export interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, JsonSchema> };
}

export interface HostileValue {
  name: string;
  /** The value as JSON text, spliced into a JSON body. */
  json: string;
  /** The value as a form field: strings as they are, anything else as its JSON text. */
  form: string;
}

const DEPTH = 10_000;
/** Base64 of ASCII text. */
const b64 = (ascii: string): string => btoa(ascii);

const text = (name: string, value: string): HostileValue => ({ name, json: JSON.stringify(value), form: value });
const raw = (name: string, json: string): HostileValue => ({ name, json, form: json });

/** Fixed hostile values, each named so a failure says which one. */
export const CATALOGUE: HostileValue[] = [
  raw("number", "12345"),
  raw("negative", "-1"),
  raw("zero", "0"),
  raw("fraction", "0.5"),
  raw("huge number", "1e308"),
  raw("huge negative", "-1e308"),
  raw("overflowing number", "1e400"),
  raw("unsafe integer", "9007199254740993"),
  raw("true", "true"),
  raw("null", "null"),
  raw("empty object", "{}"),
  raw("empty array", "[]"),
  raw("array of object", "[{}]"),
  raw("array of null", "[null]"),
  raw("nested arrays", "[[[[1]]]]"),
  raw("wide array", `[${"0,".repeat(99_999)}0]`),
  raw("wide object", `{${Array.from({ length: 10_000 }, (_, i) => `"k${i}":${i}`).join(",")}}`),
  raw("deep array", "[".repeat(DEPTH) + "]".repeat(DEPTH)),
  raw("deep object", '{"a":'.repeat(DEPTH) + "{}" + "}".repeat(DEPTH)),
  raw("__proto__ key", '{"__proto__":{"polluted":true}}'),
  raw("constructor key", '{"constructor":{"prototype":{"polluted":true}}}'),
  raw("self-referencing schema", '{"$ref":"#"}'),
  text("empty string", ""),
  text("blank string", "   "),
  text("huge string", "x".repeat(300_000)),
  text("NaN", "NaN"),
  text("Infinity", "Infinity"),
  text("negative text", "-1"),
  text("overflowing text", "1e309"),
  text("hex text", "0x1F"),
  text("long digits", "9".repeat(400)),
  text("invalid base64", "!!!not base64!!!"),
  text("base64 of a deep JSON document", b64("[".repeat(DEPTH) + "]".repeat(DEPTH))),
  text("truncated JSON", '{"a":'),
  text("unbalanced JSON", "[1,2"),
  text("deep JSON text", '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH)),
  text("__proto__ JSON text", '{"__proto__":{"polluted":true}}'),
  text("NUL", "a\u0000b"),
  text("lone surrogate", "\ud800"),
  text("bidi and emoji", "\u202e\ufeff👍🏽\u200d"),
  text("combining marks", "a\u0301".repeat(10_000)),
  text("path traversal", "../../../etc/passwd"),
  text("markup", "<script>alert(1)</script>"),
  text("unknown id", "aaaaaaaaaaaaaaaaaaaaaaaa"),
  text("true text", "true"),
];

/** Generated values on top of the catalogue: arbitrary text (any code unit), numbers and JSON. */
const generated: fc.Arbitrary<HostileValue> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }).map((s) => text(`generated text ${JSON.stringify(s)}`, s)),
  fc.double().map((n) => raw(`generated number ${n}`, Number.isFinite(n) ? JSON.stringify(n) : "null")),
  fc.jsonValue({ maxDepth: 3 }).map((v) => raw(`generated JSON ${JSON.stringify(v).slice(0, 40)}`, JSON.stringify(v))),
);

export const hostileValue: fc.Arbitrary<HostileValue> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...CATALOGUE) },
  { weight: 1, arbitrary: generated },
);

/** Inlines `$ref`s and merges `allOf` parts, so each field's schema stands alone. */
export function deref(doc: OpenApiDoc, schema: unknown, depth = 0): JsonSchema {
  if (!schema || typeof schema !== "object" || depth > 20) return {};
  const node = schema as JsonSchema;
  if (typeof node.$ref === "string")
    return deref(doc, doc.components.schemas[node.$ref.split("/").pop() ?? ""], depth + 1);
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "properties")
      out.properties = Object.fromEntries(
        Object.entries(value as JsonSchema).map(([k, v]) => [k, deref(doc, v, depth + 1)]),
      );
    else if (key === "items" || key === "additionalProperties")
      out[key] = typeof value === "object" ? deref(doc, value, depth + 1) : value;
    else if (key === "anyOf" || key === "oneOf") out[key] = (value as unknown[]).map((v) => deref(doc, v, depth + 1));
    else if (key !== "allOf") out[key] = value;
  }
  for (const part of (node.allOf as unknown[] | undefined) ?? []) {
    const merged = deref(doc, part, depth + 1);
    out.type ??= merged.type;
    out.properties = {
      ...(out.properties as JsonSchema | undefined),
      ...(merged.properties as JsonSchema | undefined),
    };
    out.required = [
      ...((out.required as string[] | undefined) ?? []),
      ...((merged.required as string[] | undefined) ?? []),
    ];
  }
  return out;
}

export interface BodyRoute {
  method: string;
  path: string;
  schema: JsonSchema;
}

export function bodyRoutes(doc: OpenApiDoc): BodyRoute[] {
  const routes: BodyRoute[] = [];
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const content = operation.requestBody?.content;
      if (content) routes.push({ method, path, schema: deref(doc, Object.values(content)[0].schema) });
    }
  }
  return routes;
}

/** The object schema of a field, if it is an object (or a union holding one). */
function objectPart(schema: JsonSchema): JsonSchema | undefined {
  if (schema.properties) return schema;
  for (const variant of (schema.anyOf ?? schema.oneOf ?? []) as JsonSchema[]) if (variant.properties) return variant;
  return undefined;
}

export interface BodyField {
  path: string[];
  schema: JsonSchema;
}

/** Every field of a body, nested object fields included (three levels down). */
export function bodyFields(schema: JsonSchema, prefix: string[] = []): BodyField[] {
  const fields: BodyField[] = [];
  for (const [name, field] of Object.entries((objectPart(schema)?.properties ?? {}) as Record<string, JsonSchema>)) {
    const path = [...prefix, name];
    fields.push({ path, schema: field });
    const inner = objectPart(field);
    if (inner && path.length < 3) fields.push(...bodyFields(inner, path));
  }
  return fields;
}

/**
 * Whether the documented schema refuses this value outright, so the route must answer 4xx. Form
 * spellings ("true", "12", a JSON string for an object) are accepted by design, so a text value
 * counts only against a field that takes text and nothing else.
 */
export function clearlyInvalid(field: JsonSchema, value: HostileValue, encoding: string): boolean {
  const textOnly = field.type === "string";
  let instance: unknown;
  try {
    instance = encoding === "json" ? JSON.parse(value.json) : value.form;
  } catch {
    return false;
  }
  if (typeof instance === "string" && !textOnly) return false;
  // A declared field sent as null is "not set" (the hosted SDK sends every unset option so):
  // a required one is then missing and refused, an optional one takes its default.
  if (instance === null) return false;
  try {
    return !new Validator(field as Schema, "2020-12").validate(instance).valid;
  } catch {
    return false;
  }
}
