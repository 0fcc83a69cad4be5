import { Validator } from "@cfworker/json-schema";
import { call } from "../helpers";

export type JsonSchema = Record<string, unknown>;
export interface Operation {
  tags?: string[];
  security?: unknown[];
  parameters?: { in: string; name: string }[];
  requestBody?: unknown;
  responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }> }>;
}
export interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, JsonSchema> };
}

export async function openApiDoc(): Promise<OpenApiDoc> {
  return (await (await call("/openapi.json")).json()) as OpenApiDoc;
}

/** Every operation as [method, path, operation]. */
export function operations(doc: OpenApiDoc): [string, string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => [method, path, op] as [string, string, Operation]),
  );
}

/**
 * Checks one real response against what the document says for its status: the status is
 * documented, the content type is one documented for it, and a JSON body validates against the
 * schema (with the document's components, as a generated client would read them). Returns the
 * problems found, empty when the response matches.
 */
export async function checkResponse(
  doc: OpenApiDoc,
  method: string,
  path: string,
  response: Response,
  label: string,
): Promise<string[]> {
  const op = doc.paths[path][method];
  const documented = op.responses[String(response.status)];
  const type = (response.headers.get("content-type") ?? "").split(";")[0].trim();
  if (!documented) {
    const text = await response.text();
    return [`${label}: status ${response.status} is not documented (${text.slice(0, 160)})`];
  }
  const content = documented.content ?? {};
  if (!content[type]) {
    await response.body?.cancel();
    return [
      `${label}: ${response.status} answered ${type || "no content type"}, documented ${Object.keys(content).join(", ") || "none"}`,
    ];
  }
  if (type !== "application/json") {
    await response.body?.cancel();
    return [];
  }
  const body: unknown = await response.json();
  const result = validator(doc, content[type].schema).validate(body);
  if (result.valid) return [];
  const errors = result.errors
    .slice(-3)
    .map((e) => `${e.instanceLocation} ${e.error}`)
    .join("; ");
  return [
    `${label}: ${response.status} body does not match its schema: ${errors} in ${JSON.stringify(body).slice(0, 300)}`,
  ];
}

const validators = new WeakMap<JsonSchema, Validator>();

function validator(doc: OpenApiDoc, schema: JsonSchema): Validator {
  const known = validators.get(schema);
  if (known) return known;
  // The components become $defs of one root schema, so every $ref resolves inside it.
  const rewrite = (value: unknown): unknown =>
    JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', '"#/$defs/'));
  const root = { ...(rewrite(schema) as JsonSchema), $defs: rewrite(doc.components.schemas) };
  const made = new Validator(root as never, "2020-12", false);
  validators.set(schema, made);
  return made;
}
