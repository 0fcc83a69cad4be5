import type { RunStatus } from "../../db/schema/pipelines";
import { NODE_OUTPUTS, type NodeSpec } from "./pipeline-nodes";
import type { PipelineGraph } from "./pipeline-graph";
import type { PipelineEdge } from "./pipelines.schemas";

/**
 * A run's pure state rules: which nodes may start, which are skipped, what the run's outputs
 * are. The run object persists these states; nothing here does I/O.
 */
export type NodeStatus =
  | "pending"
  | "running"
  | "completed"
  | "skipped"
  | "failed"
  | "awaiting_approval"
  | "sleeping"
  | "cancelled";

export interface NodeState {
  id: string;
  type: NodeSpec["type"];
  status: NodeStatus;
  outputs: Record<string, unknown> | null;
  error: string | null;
  startedAt: number | null;
  finishedAt: number | null;
  attempts: number;
  wakeAt: number | null;
  childRunId: string | null;
}

export const SETTLED: ReadonlySet<RunStatus> = new Set(["paused", "completed", "failed", "terminated"]);
export const FINISHED: ReadonlySet<RunStatus> = new Set(["completed", "failed", "terminated"]);

const DONE: ReadonlySet<NodeStatus> = new Set(["completed", "skipped"]);

/** A node's main output: its first declared output, or the whole object for open-ended types. */
export function mainOutput(type: NodeSpec["type"], outputs: Record<string, unknown> | null): unknown {
  if (!outputs) return undefined;
  const names = NODE_OUTPUTS[type];
  return names ? outputs[names[0]] : outputs;
}

/** The value an edge carries: the named output, else the source's main output. */
export function edgeValue(edge: PipelineEdge, source: NodeState): unknown {
  if (!source.outputs) return undefined;
  if (edge.source_output && source.type !== "condition") return source.outputs[edge.source_output];
  return mainOutput(source.type, source.outputs);
}

/** Whether an edge whose source is done carries control: skipped sources and untaken branches do not. */
export function edgeActive(edge: PipelineEdge, source: NodeState): boolean {
  if (source.status !== "completed") return false;
  if (source.type === "condition" && edge.source_output !== undefined) {
    return String(source.outputs?.result === true) === edge.source_output;
  }
  return true;
}

export interface Plan {
  /** Pending nodes that will never run: an incoming branch was not taken (merge: none was). */
  skip: string[];
  /** Pending nodes whose upstream is done and active. */
  ready: string[];
}

export function planNodes(graph: PipelineGraph, states: Map<string, NodeState>): Plan {
  const plan: Plan = { skip: [], ready: [] };
  const skipped = new Set<string>();
  for (const id of graph.order) {
    const state = states.get(id);
    if (state?.status !== "pending") continue;
    const incoming = graph.edges.filter((e) => e.target === id);
    const sources = incoming.map((e) => {
      const source = states.get(e.source) as NodeState;
      // A node skipped earlier in this same plan counts as done and inactive.
      return skipped.has(e.source) ? { ...source, status: "skipped" as const } : source;
    });
    if (!sources.every((s) => DONE.has(s.status))) continue;
    const active = incoming.map((e, i) => edgeActive(e, sources[i]));
    const node = graph.nodes.find((n) => n.id === id) as NodeSpec;
    const runs = incoming.length === 0 || (node.type === "merge" ? active.some(Boolean) : active.every(Boolean));
    if (runs) plan.ready.push(id);
    else {
      plan.skip.push(id);
      skipped.add(id);
    }
  }
  return plan;
}

export function allDone(states: Iterable<NodeState>): boolean {
  for (const s of states) if (!DONE.has(s.status)) return false;
  return true;
}

/** The run's outputs: each completed output node's value, by output name. */
export function runOutputs(graph: PipelineGraph, states: Map<string, NodeState>): Record<string, unknown> {
  const outputs: Record<string, unknown> = {};
  for (const node of graph.nodes) {
    if (node.type !== "output") continue;
    const state = states.get(node.id);
    if (state?.status === "completed") outputs[node.config.name] = state.outputs?.value ?? null;
  }
  return outputs;
}
