import type { EditorDocument, EditorNode } from "./editor-format";
import { NODE_OUTPUTS } from "./pipeline-nodes";
import type { NodeType, PipelineEdge, PipelineNode } from "./pipelines.schemas";

/**
 * Loom's graph in the editor format, for pipelines last written in Loom's own format: the SDK's
 * `Pipeline.fetch` builds every value of `nodes` with `Node.from_json` (reading `type`, `inputs`,
 * `id`, `name`, `execution_mode`) and reads `input_type` / `output_type` of input and output
 * nodes. The translation is the inverse of `fromEditorFormat`, so posting it back (the SDK's
 * `save`) gives the same graph; Loom's own graph is answered beside it under `graph`.
 */

type Json = Record<string, unknown>;

/** Loom's input types under the SDK's io type names (`fromEditorFormat` reads these back). */
const EDITOR_INPUT_TYPES: Record<string, string> = {
  text: "string",
  number: "float",
  boolean: "bool",
  json: "any",
  file: "file",
};

/** Loom's output names the editor spells differently (the inverse of the editor-format maps). */
function editorOutput(
  type: string | undefined,
  output: string | undefined,
  inputType: string | undefined,
): string | undefined {
  if (type === "input") return inputType === "file" ? "file" : "text";
  if (type === "knowledge_base")
    return output === "results" ? "chunks" : output === "response" ? "response" : "formatted_text";
  if (output) return output;
  const main = type ? NODE_OUTPUTS[type as NodeType]?.[0] : undefined;
  return main ?? undefined;
}

const REF = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z0-9_-]+))?\s*\}\}/g;

interface NodeFacts {
  type: string;
  inputType?: string;
}

/** `{{in}}` and `{{in.value}}` become `{{ in.text }}`: the SDK finds dependencies only in `node.output` references. */
function rewriteRefs(value: unknown, facts: Map<string, NodeFacts>): unknown {
  if (typeof value === "string") {
    return value.replace(REF, (whole, node: string, output: string | undefined) => {
      const fact = facts.get(node);
      if (!fact) return whole;
      const name = editorOutput(fact.type, output, fact.inputType);
      return name ? `{{ ${node}.${name} }}` : whole;
    });
  }
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, facts));
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewriteRefs(v, facts)]));
  return value;
}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** The editor's `inputs` and `outputs` of one Loom node (before references are rewritten). */
function editorParts(node: PipelineNode): { inputs: Json; outputs: string[]; name: string } {
  const config = node.config as Json;
  const { timeout_seconds: _timeout, ...rest } = config;
  switch (node.type) {
    case "input": {
      const inputType = EDITOR_INPUT_TYPES[str(config.type) ?? "text"] ?? "string";
      const inputs: Json = { input_type: inputType };
      if (config.description !== undefined) inputs.description = config.description;
      if (config.default !== undefined) inputs.default_value = config.default;
      return {
        inputs,
        outputs: inputType === "file" ? ["processed_text", "file"] : ["text"],
        name: str(config.name) ?? node.id,
      };
    }
    case "output":
      return {
        inputs: { output_type: "string", value: config.value ?? "" },
        outputs: [],
        name: str(config.name) ?? node.id,
      };
    case "llm": {
      const inputs: Json = { ...rest };
      // `<connection>/<model>` is the editor's provider and model; `fromEditorFormat` joins them again.
      const model = str(config.model);
      const slash = model?.indexOf("/") ?? -1;
      if (model && slash > 0) Object.assign(inputs, { provider: model.slice(0, slash), model: model.slice(slash + 1) });
      return { inputs, outputs: ["response"], name: node.id };
    }
    case "knowledge_base": {
      const { knowledge_base_id, ...others } = rest;
      return {
        inputs: { knowledge_base: { object_id: knowledge_base_id }, ...others },
        outputs: ["formatted_text", "chunks"],
        name: node.id,
      };
    }
    case "transformation":
    case "pipeline": {
      const key = node.type === "pipeline" ? "pipeline_id" : "transformation_id";
      const given = typeof config.inputs === "object" && config.inputs !== null ? (config.inputs as Json) : {};
      return { inputs: { [key]: config[key], ...given }, outputs: [], name: node.id };
    }
    default:
      // text, condition, merge, approval, wait: Loom's config is the node's inputs.
      return { inputs: rest, outputs: [...(NODE_OUTPUTS[node.type as NodeType] ?? [])], name: node.id };
  }
}

/** Edges no reference accounts for (ordering only) become the SDK's `dependencies` input. */
function dependenciesOf(
  node: PipelineNode,
  edges: PipelineEdge[],
  facts: Map<string, NodeFacts>,
  referenced: Set<string>,
): string[] {
  const out: string[] = [];
  for (const edge of edges) {
    if (edge.target !== node.id || referenced.has(edge.source)) continue;
    const fact = facts.get(edge.source);
    const output = editorOutput(fact?.type, edge.source_output, fact?.inputType) ?? "output";
    out.push(`{{ ${edge.source}.${output} }}`);
  }
  return out;
}

function referencedNodes(value: unknown): Set<string> {
  const found = new Set<string>();
  const text = JSON.stringify(value);
  for (const match of text.matchAll(REF)) found.add(match[1]);
  return found;
}

/** Loom's `{id, type, config}` nodes and edges as the editor's document. */
export function toEditorFormat(nodes: PipelineNode[], edges: PipelineEdge[]): EditorDocument {
  const facts = new Map<string, NodeFacts>(
    nodes.map((n) => [n.id, { type: n.type, inputType: str((n.config as Json).type) }]),
  );
  const doc: EditorDocument = {
    nodes: {},
    canvas_metadata: { nodes: {}, edges: edges.map((e) => ({ source: e.source, target: e.target })) },
    inputs: {},
    outputs: {},
  };
  for (const node of nodes) {
    const parts = editorParts(node);
    const inputs = rewriteRefs(parts.inputs, facts) as Json;
    inputs.dependencies = dependenciesOf(node, edges, facts, referencedNodes(parts.inputs));
    const editorNode: EditorNode = {
      id: node.id,
      name: parts.name,
      type: node.type,
      inputs,
      outputs: parts.outputs,
      task_name: null,
      execution_mode: "normal",
    };
    doc.nodes[node.id] = editorNode;
    if (node.type === "input")
      doc.inputs[parts.name] = {
        io_type: inputs.input_type,
        description: str((node.config as Json).description) ?? "",
      };
    if (node.type === "output")
      doc.outputs[parts.name] = { io_type: "string", description: str((node.config as Json).description) ?? "" };
  }
  return doc;
}
