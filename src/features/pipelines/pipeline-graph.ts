import type { z } from "@hono/zod-openapi";
import { badRequest } from "../../lib/errors";
import { NODE_CONFIGS, NODE_OUTPUTS, type NodeSpec } from "./pipeline-nodes";
import { NODE_TYPES, type NodeType, type PipelineEdge, type PipelineNode } from "./pipelines.schemas";
import { stringsIn, templateRefs } from "./pipeline-templates";

/** A definition that passed every structural check, with its nodes in a dependency order. */
export interface PipelineGraph {
  nodes: NodeSpec[];
  edges: PipelineEdge[];
  /** Node ids, each after all of its upstream nodes. */
  order: string[];
}

function isNodeType(type: string): type is NodeType {
  return (NODE_TYPES as readonly string[]).includes(type);
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  const path = issue.path.map(String).join(".");
  return path ? `config.${path}: ${issue.message}` : `config: ${issue.message}`;
}

function parseNode(node: PipelineNode): NodeSpec {
  if (!isNodeType(node.type))
    throw badRequest(`node ${node.id}: unknown node type "${node.type}" (known types: ${NODE_TYPES.join(", ")})`);
  const parsed = NODE_CONFIGS[node.type].safeParse(node.config ?? {});
  if (!parsed.success) throw badRequest(`node ${node.id} (${node.type}): ${describeIssue(parsed.error)}`);
  return { id: node.id, type: node.type, config: parsed.data } as NodeSpec;
}

/** The template texts a node's config holds, with where they sit (for messages). */
function nodeTemplates(node: NodeSpec): { where: string; text: string }[] {
  const out: { where: string; text: string }[] = [];
  const add = (where: string, value: unknown) => {
    for (const text of stringsIn(value)) out.push({ where, text });
  };
  switch (node.type) {
    case "output":
      add("value", node.config.value);
      break;
    case "text":
      add("text", node.config.text);
      break;
    case "llm":
      add("prompt", node.config.prompt);
      add("system", node.config.system);
      break;
    case "knowledge_base":
      add("query", node.config.query);
      break;
    case "transformation":
    case "pipeline":
      for (const [name, value] of Object.entries(node.config.inputs)) add(`inputs.${name}`, value);
      break;
    case "condition":
      add("left", node.config.left);
      add("right", node.config.right);
      break;
    default:
      break;
  }
  return out;
}

/** Every node upstream of each node, following edges backwards. */
function ancestorsOf(order: string[], parents: Map<string, string[]>): Map<string, Set<string>> {
  const ancestors = new Map<string, Set<string>>();
  for (const id of order) {
    const set = new Set<string>();
    for (const parent of parents.get(id) ?? []) {
      set.add(parent);
      for (const a of ancestors.get(parent) ?? []) set.add(a);
    }
    ancestors.set(id, set);
  }
  return ancestors;
}

/** Kahn's algorithm; on a cycle, names the nodes caught in it. */
function topologicalOrder(ids: string[], edges: PipelineEdge[]): string[] {
  const indegree = new Map(ids.map((id) => [id, 0]));
  const children = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const edge of edges) {
    indegree.set(edge.target, (indegree.get(edge.target) ?? 0) + 1);
    children.get(edge.source)?.push(edge.target);
  }
  const queue = ids.filter((id) => indegree.get(id) === 0);
  const order: string[] = [];
  while (queue.length > 0) {
    const id = queue.shift() as string;
    order.push(id);
    for (const child of children.get(id) ?? []) {
      const left = (indegree.get(child) ?? 0) - 1;
      indegree.set(child, left);
      if (left === 0) queue.push(child);
    }
  }
  if (order.length < ids.length) {
    const stuck = ids.filter((id) => !order.includes(id));
    throw badRequest(`node ${stuck[0]}: the pipeline has a cycle through nodes ${stuck.join(", ")}`);
  }
  return order;
}

/**
 * Checks a definition's structure: known node types and valid configs, unique ids and
 * input/output names, edges between existing nodes, no cycles, condition branches named
 * "true" or "false", and template references that point at an upstream node's real output.
 * Every message names the node at fault. References to other records are checked apart
 * (they need the database).
 */
export function validateGraph(rawNodes: PipelineNode[], edges: PipelineEdge[]): PipelineGraph {
  if (rawNodes.length === 0) throw badRequest("nodes: a pipeline needs at least one node");
  const seen = new Set<string>();
  for (const node of rawNodes) {
    if (seen.has(node.id)) throw badRequest(`node ${node.id}: the id is used by more than one node`);
    seen.add(node.id);
  }
  const nodes = rawNodes.map(parseNode);
  const byId = new Map(nodes.map((n) => [n.id, n]));

  for (const kind of ["input", "output"] as const) {
    const names = new Map<string, string>();
    for (const node of nodes) {
      if (node.type !== kind) continue;
      const other = names.get(node.config.name);
      if (other)
        throw badRequest(`node ${node.id}: ${kind} name "${node.config.name}" is already used by node ${other}`);
      names.set(node.config.name, node.id);
    }
  }

  const parents = new Map<string, string[]>(nodes.map((n) => [n.id, []]));
  for (const edge of edges) {
    const source = byId.get(edge.source);
    const target = byId.get(edge.target);
    if (!source) throw badRequest(`node ${edge.target}: an edge comes from node ${edge.source}, which does not exist`);
    if (!target) throw badRequest(`node ${edge.source}: an edge goes to node ${edge.target}, which does not exist`);
    if (edge.source === edge.target)
      throw badRequest(`node ${edge.source}: an edge connects the node to itself (a cycle)`);
    if (target.type === "input") throw badRequest(`node ${target.id}: input nodes cannot have incoming edges`);
    if (edge.source_output !== undefined) {
      if (source.type === "condition") {
        if (edge.source_output !== "true" && edge.source_output !== "false")
          throw badRequest(
            `node ${source.id}: a condition's edges leave from "true" or "false", not "${edge.source_output}"`,
          );
      } else {
        const known = NODE_OUTPUTS[source.type];
        if (known && !known.includes(edge.source_output))
          throw badRequest(`node ${source.id}: has no output "${edge.source_output}" (outputs: ${known.join(", ")})`);
      }
    }
    parents.get(edge.target)?.push(edge.source);
  }

  const order = topologicalOrder(
    nodes.map((n) => n.id),
    edges,
  );
  const ancestors = ancestorsOf(order, parents);

  for (const node of nodes) {
    for (const { where, text } of nodeTemplates(node)) {
      for (const ref of templateRefs(text)) {
        if (!ref.node)
          throw badRequest(
            `node ${node.id}: config.${where}: "${ref.raw}" is not a valid reference (use {{node_id}} or {{node_id.output}})`,
          );
        const target = byId.get(ref.node);
        if (!target)
          throw badRequest(
            `node ${node.id}: config.${where}: ${ref.raw} points to node ${ref.node}, which does not exist`,
          );
        if (!ancestors.get(node.id)?.has(ref.node))
          throw badRequest(
            `node ${node.id}: config.${where}: ${ref.raw} points to node ${ref.node}, which is not upstream of it (connect them with edges)`,
          );
        const known = NODE_OUTPUTS[target.type];
        if (ref.output && known && !known.includes(ref.output))
          throw badRequest(
            `node ${node.id}: config.${where}: ${ref.raw} points to output "${ref.output}" that node ${ref.node} does not have (outputs: ${known.join(", ")})`,
          );
      }
    }
    if (node.type === "output" && node.config.value === undefined && (parents.get(node.id)?.length ?? 0) !== 1)
      throw badRequest(`node ${node.id}: an output without config.value needs exactly one incoming edge`);
  }
  return { nodes, edges, order };
}
