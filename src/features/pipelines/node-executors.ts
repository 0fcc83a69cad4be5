import type { AuthContext } from "../../env";
import type { ChatMessage } from "../../providers/types";
import type { NodeSpec } from "./pipeline-nodes";
import type { PipelineGraph } from "./pipeline-graph";
import { NodeFailure, type NodeServices } from "./pipeline-services";
import { renderTemplate, renderValue, stringifyValue, type RefResolver } from "./pipeline-templates";
import { edgeActive, edgeValue, mainOutput, type NodeState } from "./run-state";

/** Everything one node execution may read. */
export interface NodeContext {
  auth: AuthContext;
  services: NodeServices;
  graph: PipelineGraph;
  states: Map<string, NodeState>;
  inputs: Record<string, unknown>;
  runId: string;
  depth: number;
  signal: AbortSignal;
  /** Persisted before the call, so a sub-pipeline is re-attached rather than started twice. */
  childRunId: string | null;
}

export function resolverFor(ctx: Pick<NodeContext, "states">): RefResolver {
  return (nodeId, output) => {
    const state = ctx.states.get(nodeId);
    if (state?.status !== "completed" || !state.outputs) return undefined;
    return output ? state.outputs[output] : mainOutput(state.type, state.outputs);
  };
}

/** Values on the node's active incoming edges, in edge order. */
function incomingValues(
  node: NodeSpec,
  ctx: Pick<NodeContext, "graph" | "states">,
): { edgeInput?: string; value: unknown }[] {
  const values: { edgeInput?: string; value: unknown }[] = [];
  for (const edge of ctx.graph.edges) {
    if (edge.target !== node.id) continue;
    const source = ctx.states.get(edge.source);
    if (!source || !edgeActive(edge, source)) continue;
    values.push({ edgeInput: edge.target_input, value: edgeValue(edge, source) });
  }
  return values;
}

/** Inputs for a transformation or sub-pipeline: edges that name a target input, then the config's templates. */
function namedInputs(
  node: NodeSpec & { config: { inputs: Record<string, unknown> } },
  ctx: NodeContext,
): Record<string, unknown> {
  const resolve = resolverFor(ctx);
  const inputs: Record<string, unknown> = {};
  for (const { edgeInput, value } of incomingValues(node, ctx)) if (edgeInput) inputs[edgeInput] = value;
  for (const [name, template] of Object.entries(node.config.inputs)) inputs[name] = renderValue(template, resolve);
  return inputs;
}

function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === "") return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.keys(value).length === 0;
  return false;
}

function asNumber(value: unknown, nodeId: string, side: string): number {
  const n = typeof value === "number" ? value : Number(stringifyValue(value).trim());
  if (stringifyValue(value).trim() === "" || !Number.isFinite(n))
    throw new NodeFailure(`node ${nodeId}: the ${side} value "${stringifyValue(value).slice(0, 100)}" is not a number`);
  return n;
}

export function compareValues(nodeId: string, operator: string, left: unknown, right: unknown): boolean {
  const l = stringifyValue(left);
  const r = stringifyValue(right);
  switch (operator) {
    case "equals":
      return typeof left === "number" || typeof right === "number"
        ? asNumber(left, nodeId, "left") === asNumber(right, nodeId, "right")
        : l === r;
    case "not_equals":
      return !compareValues(nodeId, "equals", left, right);
    case "contains":
      return Array.isArray(left) ? left.some((item) => stringifyValue(item) === r) : l.includes(r);
    case "not_contains":
      return !compareValues(nodeId, "contains", left, right);
    case "starts_with":
      return l.startsWith(r);
    case "ends_with":
      return l.endsWith(r);
    case "greater_than":
      return asNumber(left, nodeId, "left") > asNumber(right, nodeId, "right");
    case "greater_or_equal":
      return asNumber(left, nodeId, "left") >= asNumber(right, nodeId, "right");
    case "less_than":
      return asNumber(left, nodeId, "left") < asNumber(right, nodeId, "right");
    case "less_or_equal":
      return asNumber(left, nodeId, "left") <= asNumber(right, nodeId, "right");
    case "is_empty":
      return isEmpty(left);
    case "is_not_empty":
      return !isEmpty(left);
    default:
      throw new NodeFailure(`node ${nodeId}: unknown operator ${operator}`);
  }
}

/** The value a pass-through node (approval, wait) hands on: its single upstream's main output. */
export function passThrough(node: NodeSpec, ctx: Pick<NodeContext, "graph" | "states">): Record<string, unknown> {
  const values = incomingValues(node, ctx);
  return { value: values.length === 1 ? values[0].value : values.length === 0 ? null : values.map((v) => v.value) };
}

/**
 * Runs one node and returns its outputs. Approval and wait are state changes the run object
 * makes itself; here they only compute what they pass on.
 */
export async function executeNode(node: NodeSpec, ctx: NodeContext): Promise<Record<string, unknown>> {
  const resolve = resolverFor(ctx);
  switch (node.type) {
    case "input": {
      const value = ctx.inputs[node.config.name];
      return { value: value === undefined ? (node.config.default ?? null) : value };
    }
    case "output": {
      if (node.config.value !== undefined) return { value: renderValue(node.config.value, resolve) };
      return passThrough(node, ctx);
    }
    case "text":
      return { text: renderTemplate(node.config.text, resolve) };
    case "llm": {
      const messages: ChatMessage[] = [];
      if (node.config.system) messages.push({ role: "system", content: renderTemplate(node.config.system, resolve) });
      messages.push({ role: "user", content: renderTemplate(node.config.prompt, resolve) });
      const result = await ctx.services.chat(ctx.auth, {
        model: node.config.model,
        connectionId: node.config.connection_id,
        messages,
        temperature: node.config.temperature,
        maxTokens: node.config.max_tokens,
        signal: ctx.signal,
      });
      return { response: result.text, model: result.model };
    }
    case "knowledge_base": {
      const query = renderTemplate(node.config.query, resolve);
      const result = await ctx.services.queryKnowledgeBase(
        ctx.auth,
        node.config.knowledge_base_id,
        query,
        { search_metadata: node.config.search_metadata, config: node.config.config },
        ctx.signal,
      );
      return { text: result.text, results: result.results, response: result.response ?? null };
    }
    case "transformation":
      return ctx.services.runTransformation(
        ctx.auth,
        node.config.transformation_id,
        namedInputs(node, ctx),
        ctx.signal,
      );
    case "condition": {
      const left = renderValue(node.config.left, resolve);
      const right = renderValue(node.config.right, resolve);
      return { result: compareValues(node.id, node.config.operator, left, right), value: left };
    }
    case "merge": {
      const values = incomingValues(node, ctx).map((v) => v.value);
      return { value: node.config.strategy === "all" ? values : (values[0] ?? null) };
    }
    case "approval":
    case "wait":
      return passThrough(node, ctx);
    case "pipeline": {
      if (!ctx.childRunId) throw new Error("a pipeline node runs only with a child run id");
      const result = await ctx.services.runPipeline(ctx.auth, node.config.pipeline_id, namedInputs(node, ctx), {
        runId: ctx.childRunId,
        parentRunId: ctx.runId,
        depth: ctx.depth + 1,
        signal: ctx.signal,
      });
      if (result.status !== "completed")
        throw new NodeFailure(
          `sub-pipeline run ${ctx.childRunId} ${result.status === "failed" ? `failed: ${result.error ?? "unknown error"}` : `ended ${result.status}`}`,
        );
      return result.outputs;
    }
  }
}
