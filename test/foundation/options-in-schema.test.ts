import type { z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app";
import { DEFINITION_FORMATS } from "../../src/features/pipelines/pipeline-definition-body";
import { defOf, unwrap } from "../../src/lib/unknown-fields";
import { openApiDoc, type JsonSchema, type OpenApiDoc } from "./openapi-contract";

/**
 * Every option the server reads is in /openapi.json. Derived from the code, not from a list: a
 * handler sees only what its route's zod schemas validated (src/lib/route.ts), typed by them, so
 * an option the code reads is a key of those schemas. This walks each registered route's body
 * and query schemas and checks each key against the document a client reads. Free-form spots
 * (records, unknown values) are where a typed read cannot reach; they must be data (metadata,
 * filters, inputs), each listed below with where it is checked, so options never hide in one.
 */

interface RouteEntry {
  method: string;
  path: string;
  body?: z.ZodType;
  query?: z.ZodType;
}

/**
 * Bodies whose schema picks a format by the body's shape at run time (opaque to a walker): the
 * formats it picks from, which is what the handler reads.
 */
const FORMATS_OF: Record<string, z.ZodType[]> = {
  "post /v1/pipeline": [DEFINITION_FORMATS.PipelineCreateBody, DEFINITION_FORMATS.EditorPipelineBody],
  "post /v1/update/pipeline/{id}": [DEFINITION_FORMATS.PipelineUpdateBody, DEFINITION_FORMATS.EditorPipelineUpdateBody],
};

const bodySchemas = (route: RouteEntry): z.ZodType[] =>
  FORMATS_OF[`${route.method} ${route.path}`] ?? (route.body ? [route.body] : []);

function registeredRoutes(): RouteEntry[] {
  const app = createApp();
  const routes: RouteEntry[] = [];
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== "route") continue;
    const { method, path, request } = definition.route;
    const content = request?.body?.content ?? {};
    const first = Object.values(content)[0] as { schema?: z.ZodType } | undefined;
    routes.push({ method, path, body: first?.schema, query: request?.query as z.ZodType | undefined });
  }
  return routes;
}

/** The dotted field paths a zod schema accepts (`[]` for array items), and its free-form spots. */
function acceptedFields(schema: z.ZodType): { fields: Set<string>; freeForm: Set<string> } {
  const fields = new Set<string>();
  const freeForm = new Set<string>();
  const walk = (node: z.ZodType, path: string, depth: number): void => {
    if (depth > 40) return;
    const def = defOf(unwrap(node));
    switch (def.type) {
      case "object":
        for (const [key, member] of Object.entries(def.shape ?? {})) {
          const child = path ? `${path}.${key}` : key;
          fields.add(child);
          walk(member, child, depth + 1);
        }
        if (def.catchall && defOf(def.catchall).type !== "never") freeForm.add(path || "(body)");
        break;
      case "array":
        if (def.element) walk(def.element, `${path}[]`, depth + 1);
        break;
      case "union":
        for (const option of def.options ?? []) walk(option, path, depth + 1);
        break;
      case "intersection":
        if (def.left) walk(def.left, path, depth + 1);
        if (def.right) walk(def.right, path, depth + 1);
        break;
      case "record": {
        // Keyed by the caller's names (node ids, input names): its values are walked as `path.*`.
        const value = def.valueType ? defOf(unwrap(def.valueType)).type : "unknown";
        if (value === "unknown" || value === "any") freeForm.add(path);
        else if (def.valueType) walk(def.valueType, `${path}.*`, depth + 1);
        break;
      }
      case "unknown":
      case "any":
        freeForm.add(path);
        break;
    }
  };
  walk(schema, "", 0);
  return { fields, freeForm };
}

/** The dotted field paths a JSON Schema in the document declares, through $ref and combinators. */
function documentedFields(doc: OpenApiDoc, schema: JsonSchema): Set<string> {
  const fields = new Set<string>();
  const walk = (node: JsonSchema | undefined, path: string, depth: number): void => {
    if (!node || depth > 40) return;
    const ref = node.$ref;
    if (typeof ref === "string") {
      walk(doc.components.schemas[ref.replace("#/components/schemas/", "")], path, depth + 1);
      return;
    }
    for (const key of ["allOf", "anyOf", "oneOf"])
      for (const part of (node[key] as JsonSchema[] | undefined) ?? []) walk(part, path, depth + 1);
    for (const [key, member] of Object.entries((node.properties as Record<string, JsonSchema> | undefined) ?? {})) {
      const child = path ? `${path}.${key}` : key;
      fields.add(child);
      walk(member, child, depth + 1);
    }
    if (node.items) walk(node.items as JsonSchema, `${path}[]`, depth + 1);
    if (typeof node.additionalProperties === "object")
      walk(node.additionalProperties as JsonSchema, `${path}.*`, depth + 1);
  };
  walk(schema, "", 0);
  return fields;
}

/**
 * The free-form spots of request bodies, by field name: data a caller owns, never an option the
 * server interprets without a schema. A new record or `unknown` field fails the test below until
 * it is either given a schema (an option) or added here with the reason it is data.
 */
const FREE_FORM_DATA: Record<string, string> = {
  custom_metadata: "a document's own metadata, stored and filterable",
  filter: "a metadata filter: its own language, parsed by metadata-filter.ts (400 on a bad one)",
  searchengine_filter: "the hosted SDK's name for filter",
  opensearch_filter: "the hosted SDK's name for filter",
  inputs: "a run's inputs, named by the pipeline's or transformation's own input nodes",
  default: "an input node's default value, any JSON",
  // Validated with the knowledge-base query's own schema when the node runs (parseKnowledgeBaseQuery).
  search_metadata: "a pipeline knowledge-base node's query options, checked by KnowledgeBaseQueryBody at run time",
  config: "a node's or agent's configuration, checked by its type's own schema",
  metadata: "caller metadata stored with the record",
  settings: "a connection's vendor settings, checked per kind",
  input_schema: "a transformation's JSON Schema for its inputs, the caller's own",
  output_schema: "a transformation's JSON Schema for its outputs, the caller's own",
  outputs: "the hosted SDK's name for output_schema",
  // Read-only keys a fetched chatbot carries, accepted back and ignored (chatbots.schemas.ts).
  has_password: "read-only, ignored",
  has_auth_token: "read-only, ignored",
  auth_token_last_four: "read-only, ignored",
  has_signing_secret: "read-only, ignored",
  has_bot_token: "read-only, ignored",
  bot_token_last_four: "read-only, ignored",
  "(body)": "a pipeline run's file inputs: top-level multipart parts named after the input",
  canvas_metadata: "the pipeline editor's canvas layout, stored and answered back as sent",
  cyclic_inputs: "the editor's loop inputs: accepted only empty (a 400 otherwise, Loom runs acyclic graphs)",
  // Agents (agent-definition.ts): the SDK's objects carry more keys than Loom reads.
  llm_client_key: "the SDK's model client: provider and model_id are read, api_key refused, other keys ignored",
  value: "an agent tool's SDK node: node_type, inputs and task_name are read, the editor's other keys ignored",
};

describe("every option the server reads is in /openapi.json", () => {
  it("each body field and query parameter a route accepts is documented on that route", async () => {
    const doc = await openApiDoc();
    const routes = registeredRoutes();
    expect(routes.length).toBeGreaterThan(50);
    const missing: string[] = [];
    let checked = 0;
    for (const route of routes) {
      const operation = doc.paths[route.path]?.[route.method];
      if (!operation) {
        missing.push(`${route.method.toUpperCase()} ${route.path}: not in the document`);
        continue;
      }
      if (route.body) {
        const content =
          (operation.requestBody as { content?: Record<string, { schema: JsonSchema }> } | undefined)?.content ?? {};
        const documented = new Set<string>();
        for (const media of Object.values(content))
          for (const field of documentedFields(doc, media.schema)) documented.add(field);
        for (const field of bodySchemas(route).flatMap((schema) => [...acceptedFields(schema).fields])) {
          checked += 1;
          if (!documented.has(field)) missing.push(`${route.method.toUpperCase()} ${route.path}: body ${field}`);
        }
      }
      if (route.query) {
        const documented = new Set((operation.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name));
        for (const field of acceptedFields(route.query).fields) {
          checked += 1;
          if (!documented.has(field)) missing.push(`${route.method.toUpperCase()} ${route.path}: query ${field}`);
        }
      }
    }
    expect(missing).toEqual([]);
    expect(checked).toBeGreaterThan(300);
  });

  it("free-form fields in request bodies are data, never options read without a schema", () => {
    const unexplained: string[] = [];
    for (const route of registeredRoutes()) {
      if (!route.body) continue;
      for (const spot of bodySchemas(route).flatMap((schema) => [...acceptedFields(schema).freeForm])) {
        const name = spot.replace(/\[\]$/, "").split(".").pop() ?? spot;
        if (!Object.hasOwn(FREE_FORM_DATA, name))
          unexplained.push(`${route.method.toUpperCase()} ${route.path}: ${spot}`);
      }
    }
    expect(unexplained).toEqual([]);
  });

  it("documents the knowledge-base query options the issue found missing, at the level they are read", async () => {
    const doc = await openApiDoc();
    const query = documentedFields(doc, { $ref: "#/components/schemas/KnowledgeBaseQueryBody" });
    for (const option of [
      "config.expand_query",
      "config.do_advanced_qa",
      "config.score_cutoff",
      "config.hybrid_search_config.alpha",
      "config.retrieval_config.search_mode",
      "config.reranking_config.num_chunks_to_rerank",
      "config.question_answering_config.qa_model",
      "config.embedding_model",
      "search_metadata.top_k",
      "search_metadata.group_by_key",
    ]) {
      expect(query.has(option), option).toBe(true);
    }
    // A typo is not an option: the server warns about it rather than reading it.
    expect(query.has("config.scor_cutoff")).toBe(false);
    expect(query.has("hybrid_search_config")).toBe(false);
  });
});
