import { z } from "@hono/zod-openapi";
import { badRequest } from "../../lib/errors";
import { zFreeObject, zInt, zJsonObject, zString } from "../../lib/schema";
import { stringsIn } from "./pipeline-templates";
import {
  MAX_DEFINITION_BYTES,
  MAX_EDGES,
  MAX_NODES,
  MAX_TEMPLATE_CHARS,
  type PipelineEdge,
  type PipelineNode,
} from "./pipelines.schemas";

/**
 * The hosted platform's editor format (what its Python SDK's `Pipeline.new` / `save` send and
 * `Pipeline.fetch` reads): nodes keyed by id, each `{id, name, type, inputs, outputs, task_name,
 * execution_mode}`, wired by `{{ node_id.output }}` references inside `inputs`. This module
 * translates it to Loom's graph (`{id, type, config}` nodes and edges); the document as sent is
 * stored beside the graph, so a fetch answers it back unchanged.
 */

/**
 * The one execution mode Loom has: each node runs once per run, when its dependencies are done.
 * The hosted platform's other modes (running a node per item of a list) are refused, not ignored.
 */
const EXECUTION_MODE = "normal";

const NodeIdPattern = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

export const EditorNodeSchema = z
  .object({
    id: z.string().regex(NodeIdPattern, "node ids are 1-64 letters, digits, '_' or '-', starting with a letter or '_'"),
    name: zString(1, 200).optional(),
    type: zString(1, 60),
    inputs: zFreeObject(MAX_TEMPLATE_CHARS * 4)
      .optional()
      .default({}),
    outputs: z.array(z.string().max(200)).max(200).optional(),
    task_name: zString(0, 200).optional(),
    execution_mode: zString(0, 40).optional(),
    cyclic_inputs: zFreeObject(MAX_TEMPLATE_CHARS * 4).optional(),
  })
  // The SDK sends `task_name: null` and `execution_mode: "normal"` when unset (nulls are dropped
  // on the way in); both are stored as the SDK would answer them, so fetch gives back what was saved.
  .transform((node) => ({
    ...node,
    task_name: node.task_name ?? null,
    execution_mode: node.execution_mode ?? EXECUTION_MODE,
  }));
export type EditorNode = z.output<typeof EditorNodeSchema>;

const editorFields = {
  description: zString(0, 2000).optional(),
  nodes: z
    .record(z.string().max(64), zJsonObject(EditorNodeSchema))
    .refine((nodes) => Object.keys(nodes).length <= MAX_NODES, `a pipeline has at most ${MAX_NODES} nodes`)
    .openapi({
      description:
        "The editor format: nodes keyed by id, `{id, name, type, inputs, outputs, task_name, execution_mode}`.",
    }),
  canvas_metadata: zFreeObject(MAX_DEFINITION_BYTES).optional(),
  inputs: zFreeObject(MAX_DEFINITION_BYTES).optional(),
  outputs: zFreeObject(MAX_DEFINITION_BYTES).optional(),
  branch_id: zString(0, 64).optional(),
  max_steps: zInt(1, 10_000).optional(),
  node_timeout_seconds: zInt(1, 900).optional(),
};

/**
 * The editor document is stored beside its translation in one D1 row (at most 2 MB), so it gets
 * three quarters of Loom's definition bound; the translation is no larger than its nodes.
 */
export const MAX_EDITOR_BYTES = (MAX_DEFINITION_BYTES * 3) / 4;
const withinBounds = (body: { nodes: unknown; canvas_metadata?: unknown; inputs?: unknown; outputs?: unknown }) =>
  JSON.stringify({ n: body.nodes, c: body.canvas_metadata ?? {}, i: body.inputs ?? {}, o: body.outputs ?? {} })
    .length <= MAX_EDITOR_BYTES;
const boundsMessage = {
  message: `the definition (nodes, canvas_metadata, inputs and outputs) must serialize to at most ${MAX_EDITOR_BYTES} bytes`,
  path: ["nodes"],
};

export const EditorPipelineBody = z
  .object({ name: zString(1, 200), ...editorFields })
  .refine(withinBounds, boundsMessage);
/** An update names no pipeline (the path does) and may rename it. */
export const EditorPipelineUpdateBody = z
  .object({ name: zString(1, 200).optional(), ...editorFields })
  .refine(withinBounds, boundsMessage);
export type EditorPipelineInput = z.output<typeof EditorPipelineUpdateBody>;

/** What is stored and answered back: the document as the client sent it. */
export interface EditorDocument {
  nodes: Record<string, EditorNode>;
  canvas_metadata: Record<string, unknown>;
  inputs: Record<string, unknown>;
  outputs: Record<string, unknown>;
}

/** True when a body is in the editor format (`nodes` an object keyed by id, not Loom's list). */
export function isEditorBody(body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const nodes = (body as { nodes?: unknown }).nodes;
  return typeof nodes === "object" && nodes !== null && !Array.isArray(nodes);
}

const INPUT_TYPES: Record<string, "text" | "number" | "boolean" | "json" | "file"> = {
  string: "text",
  text: "text",
  file: "file",
  int32: "number",
  int64: "number",
  int: "number",
  float: "number",
  float64: "number",
  number: "number",
  bool: "boolean",
  boolean: "boolean",
  json: "json",
  any: "json",
};

/** Editor node types Loom runs, with the Loom type each becomes. Loom's own types pass as themselves. */
const RUNNABLE = [
  "input",
  "output",
  "text",
  "llm",
  "knowledge_base",
  "transformation",
  "pipeline",
  "condition",
  "merge",
  "approval",
  "wait",
] as const;

/** The output names the editor uses for Loom's input node and knowledge-base node. */
const INPUT_OUTPUT_NAMES = new Set(["text", "file", "processed_text", "value"]);
const KB_OUTPUT_NAMES: Record<string, string> = { formatted_text: "text", chunks: "results", documents: "results" };

const REF = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z0-9_-]+))?\s*\}\}/g;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A record reference as the SDK writes it: an id, or `{object_id, object_type, branch_id?}`. */
function idOf(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (isObject(value)) {
    const id = value.object_id ?? value.id ?? value._id;
    if (typeof id === "string") return id;
  }
  return undefined;
}

/** Rewrites the editor's output names to Loom's where they differ (an input node's `text` is Loom's `value`). */
function rewriteRefs(value: unknown, types: Map<string, string>): unknown {
  if (typeof value === "string") {
    return value.replace(REF, (whole, node: string, output: string | undefined) => {
      const type = types.get(node);
      if (!output || !type) return whole;
      if (type === "input" && INPUT_OUTPUT_NAMES.has(output)) return `{{${node}.value}}`;
      if (type === "knowledge_base" && KB_OUTPUT_NAMES[output]) return `{{${node}.${KB_OUTPUT_NAMES[output]}}}`;
      return whole;
    });
  }
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, types));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewriteRefs(v, types)]));
  return value;
}

/** The node's inputs without nulls (the SDK sends unset options as null) and without `dependencies`. */
function setInputs(inputs: Json, drop: string[] = []): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(inputs))
    if (value !== null && key !== "dependencies" && !drop.includes(key)) out[key] = value;
  return out;
}

function ioInfo(doc: Json | undefined, name: string): Json {
  const info = doc?.[name];
  return isObject(info) ? info : {};
}

function inputConfig(node: EditorNode, inputs: Json, declared: Json): Json {
  const name = node.name ?? node.id;
  const ioType = String(inputs.input_type ?? declared.io_type ?? "string");
  const type = INPUT_TYPES[ioType];
  if (!type)
    throw badRequest(
      `node ${node.id} (input): input_type "${ioType}" is not one Loom runs (use ${Object.keys(INPUT_TYPES).join(", ")})`,
    );
  const config: Json = { name, type };
  const description = inputs.description ?? declared.description;
  if (typeof description === "string" && description !== "") config.description = description;
  const fallback = inputs.default_value ?? declared.default_value;
  if (fallback !== undefined && fallback !== null && fallback !== "") {
    config.default = fallback;
    config.required = false;
  }
  return config;
}

function llmConfig(inputs: Json): Json {
  const config: Json = { prompt: inputs.prompt ?? "" };
  if (typeof inputs.system === "string" && inputs.system !== "") config.system = inputs.system;
  // Loom names a model `<connection>/<model>`; the editor gives the provider apart.
  if (typeof inputs.model === "string" && inputs.model !== "")
    config.model =
      inputs.model.includes("/") || typeof inputs.provider !== "string"
        ? inputs.model
        : `${inputs.provider}/${inputs.model}`;
  if (inputs.temperature !== undefined) config.temperature = inputs.temperature;
  if (inputs.max_tokens !== undefined) config.max_tokens = inputs.max_tokens;
  return config;
}

/** One editor node as Loom's `{id, type, config}`; a type Loom cannot run is a 400 naming it. */
function toLoomNode(node: EditorNode, doc: EditorPipelineInput): PipelineNode {
  const type = node.type;
  if (!(RUNNABLE as readonly string[]).includes(type))
    throw badRequest(
      `node ${node.id}: node type "${type}" is not one Loom can run (Loom runs: ${RUNNABLE.join(", ")})`,
    );
  if (node.execution_mode !== EXECUTION_MODE)
    throw badRequest(
      `node ${node.id}: execution_mode "${node.execution_mode}" is not one Loom runs (Loom runs each node once per run: "${EXECUTION_MODE}")`,
    );
  if (node.cyclic_inputs && Object.keys(node.cyclic_inputs).length > 0)
    throw badRequest(`node ${node.id}: cyclic_inputs are not supported (Loom runs acyclic graphs)`);
  const inputs = setInputs(node.inputs);
  switch (type) {
    case "input":
      return { id: node.id, type, config: inputConfig(node, inputs, ioInfo(doc.inputs, node.name ?? node.id)) };
    case "output":
      return { id: node.id, type, config: { name: node.name ?? node.id, value: inputs.value ?? "" } };
    case "text":
      return { id: node.id, type, config: { text: inputs.text ?? "" } };
    case "llm":
      return { id: node.id, type, config: llmConfig(inputs) };
    case "knowledge_base":
      return {
        id: node.id,
        type,
        config: {
          knowledge_base_id: idOf(inputs.knowledge_base ?? inputs.knowledge_base_id) ?? "",
          query: inputs.query ?? "",
        },
      };
    case "transformation":
      return {
        id: node.id,
        type,
        config: {
          transformation_id: idOf(inputs.transformation_id ?? inputs.transformation) ?? "",
          inputs: setInputs(inputs, ["transformation_id", "transformation"]),
        },
      };
    case "pipeline":
      return {
        id: node.id,
        type,
        config: {
          pipeline_id: idOf(inputs.pipeline_id ?? inputs.pipeline) ?? "",
          inputs: setInputs(inputs, ["pipeline_id", "pipeline"]),
        },
      };
    default:
      // condition, merge, approval, wait: the editor has no such node; Loom's config is its inputs.
      return { id: node.id, type, config: inputs };
  }
}

/** Edges follow the references: each `{{ a.x }}` in b's inputs (or its `dependencies`) is an edge a -> b. */
function edgesOf(nodes: Record<string, EditorNode>): PipelineEdge[] {
  const edges: PipelineEdge[] = [];
  const seen = new Set<string>();
  for (const node of Object.values(nodes)) {
    for (const text of stringsIn(node.inputs)) {
      for (const match of text.matchAll(REF)) {
        const source = match[1];
        const key = `${source}>${node.id}`;
        if (!nodes[source] || source === node.id || seen.has(key)) continue;
        seen.add(key);
        edges.push({ source, target: node.id });
        if (edges.length > MAX_EDGES)
          throw badRequest(
            `node ${node.id}: the references make more than ${MAX_EDGES} edges, the most a pipeline may have`,
          );
      }
    }
  }
  return edges;
}

/** Translates an editor document to Loom's graph; the graph is then checked like any other. */
export function fromEditorFormat(doc: EditorPipelineInput): {
  nodes: PipelineNode[];
  edges: PipelineEdge[];
  editor: EditorDocument;
} {
  const types = new Map<string, string>();
  for (const [key, node] of Object.entries(doc.nodes)) {
    if (key !== node.id)
      throw badRequest(`node ${node.id}: is filed under the key "${key}"; the key must be the node's id`);
    types.set(node.id, node.type);
  }
  const nodes = Object.values(doc.nodes).map((node) => {
    const loom = toLoomNode(node, doc);
    return { ...loom, config: rewriteRefs(loom.config, types) as Json };
  });
  const editor: EditorDocument = {
    nodes: doc.nodes,
    canvas_metadata: doc.canvas_metadata ?? {},
    inputs: doc.inputs ?? {},
    outputs: doc.outputs ?? {},
  };
  return { nodes, edges: edgesOf(doc.nodes), editor };
}
