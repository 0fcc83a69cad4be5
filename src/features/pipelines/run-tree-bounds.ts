import { and, eq, inArray } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { pipelines } from "../../db/schema/pipelines";
import { badRequest } from "../../lib/errors";
import type { PipelineGraph } from "./pipeline-graph";
import type { PipelineNode } from "./pipelines.schemas";
import type { RunLimits } from "./run-admission";

/**
 * The static half of the run-tree bounds, checked when a pipeline is created: how deep its
 * sub-pipelines nest and how many runs one run of it could start, counting every `pipeline`
 * node as taken (a condition may skip some at run time, never add any). A definition may only
 * name pipelines that already exist, and an update (`selfId`) is refused when its sub-pipelines
 * lead back to the pipeline being updated, so no cycle can be stored; the walk also stops as
 * soon as a bound is passed, so it loads at most about `maxRunsPerRoot` definitions
 * per level and `maxDepth + 1` levels. Run-time admission (`run-admission.ts`) enforces the
 * same bounds again, exactly, for limits lowered after creation.
 */

/** Definitions loaded per query (D1 binds at most 100 parameters). */
const LOAD_CHUNK = 50;

function subPipelineIds(nodes: PipelineNode[]): string[] {
  const ids: string[] = [];
  for (const node of nodes) {
    const id = node.type === "pipeline" ? (node.config as { pipeline_id?: unknown }).pipeline_id : undefined;
    if (typeof id === "string") ids.push(id);
  }
  return ids;
}

async function loadChildren(env: Env, orgId: string, ids: string[], into: Map<string, string[]>): Promise<void> {
  const db = database(env);
  for (let i = 0; i < ids.length; i += LOAD_CHUNK) {
    const chunk = ids.slice(i, i + LOAD_CHUNK);
    const rows = await db
      .select({ id: pipelines.id, nodes: pipelines.nodes })
      .from(pipelines)
      .where(and(eq(pipelines.orgId, orgId), inArray(pipelines.id, chunk)));
    for (const row of rows) into.set(row.id, subPipelineIds(row.nodes));
    // A pipeline deleted since it was referenced starts nothing (its node fails at run time).
    for (const id of chunk) if (!into.has(id)) into.set(id, []);
  }
}

function nodeList(ids: string[]): string {
  return ids.length <= 5 ? ids.join(", ") : `${ids.slice(0, 5).join(", ")} and ${ids.length - 5} more`;
}

export async function checkRunTree(
  env: Env,
  orgId: string,
  graph: PipelineGraph,
  limits: RunLimits,
  selfId?: string,
): Promise<void> {
  const top = graph.nodes.filter((n) => n.type === "pipeline");
  if (top.length === 0) return;
  const children = new Map<string, string[]>();
  // Each level: the pipelines whose runs it would start, with how many runs of each, and the
  // first top-level node that leads there (to name it).
  let level = new Map<string, { runs: number; via: string }>();
  for (const node of top) {
    const entry = level.get(node.config.pipeline_id);
    level.set(node.config.pipeline_id, { runs: (entry?.runs ?? 0) + 1, via: entry?.via ?? node.id });
  }
  let total = 1;
  for (let depth = 1; level.size > 0; depth++) {
    if (depth > limits.maxDepth) {
      const via = [...level.values()][0].via;
      throw badRequest(
        `node ${via}: its sub-pipelines nest at least ${depth} deep; the limit is ${limits.maxDepth} (PIPELINE_MAX_DEPTH)`,
      );
    }
    for (const { runs } of level.values()) total += runs;
    if (total > limits.maxRunsPerRoot)
      throw badRequest(
        `nodes ${nodeList(top.map((n) => n.id))}: one run of this pipeline could start ${total} or more runs with its sub-pipelines; the limit is ${limits.maxRunsPerRoot} runs per run (PIPELINE_MAX_RUNS_PER_ROOT)`,
      );
    if (selfId && level.has(selfId)) {
      const via = level.get(selfId)?.via as string;
      throw badRequest(
        depth === 1
          ? `node ${via}: a pipeline cannot run itself as a sub-pipeline`
          : `node ${via}: its sub-pipelines run this pipeline again (a cycle ${depth} deep)`,
      );
    }
    await loadChildren(
      env,
      orgId,
      [...level.keys()].filter((id) => !children.has(id)),
      children,
    );
    const next = new Map<string, { runs: number; via: string }>();
    for (const [id, { runs, via }] of level) {
      for (const child of children.get(id) ?? []) {
        const entry = next.get(child);
        next.set(child, { runs: (entry?.runs ?? 0) + runs, via: entry?.via ?? via });
      }
    }
    level = next;
  }
}
