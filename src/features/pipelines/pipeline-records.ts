import { eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { pipelines } from "../../db/schema/pipelines";
import { assertVisible, ownedRecordFields } from "../../lib/ownership";
import { validateGraph, type PipelineGraph } from "./pipeline-graph";
import type { EditorDocument } from "./editor-format";
import type { PipelineEdge, PipelineNode } from "./pipelines.schemas";

/*
 * A pipeline as stored and as the run modules load it. Imports nothing from the pipeline services,
 * so pipelines.service, pipeline-runs.service and pipeline-run-control can all depend on it
 * without a cycle.
 */

export const DEFAULT_MAX_STEPS = 1000;
export const DEFAULT_NODE_TIMEOUT_SECONDS = 300;

export interface PipelineSettings {
  max_steps: number;
  node_timeout_seconds: number;
}

type PipelineRow = typeof pipelines.$inferSelect;

export interface PipelineRecord {
  _id: string;
  name: string;
  description: string;
  nodes: PipelineNode[];
  edges: PipelineEdge[];
  settings: PipelineSettings;
  version: number;
  branchId: string;
  /** The definition as the editor format sent it; null when it was given in Loom's format. */
  editor: EditorDocument | null;
  ownerId: string;
  orgId: string;
  createdAt: string;
  updatedAt: string;
}

export function toRecord(row: PipelineRow): PipelineRecord {
  return {
    ...ownedRecordFields(row),
    nodes: row.nodes,
    edges: row.edges,
    settings: {
      max_steps: DEFAULT_MAX_STEPS,
      node_timeout_seconds: DEFAULT_NODE_TIMEOUT_SECONDS,
      ...row.settings,
    },
    version: row.version,
    branchId: row.branchId ?? row.id,
    editor: row.editor ?? null,
  };
}

/**
 * Validated graphs by pipeline id and version. A version never changes once written, so a graph
 * checked once is reused by every later run of it in this isolate (the row is still read, for
 * tenancy and to learn the current version).
 */
const graphCache = new Map<string, PipelineGraph>();
const GRAPH_CACHE_SIZE = 500;

function graphOf(record: PipelineRecord): PipelineGraph {
  const key = `${record._id}@${record.version}`;
  const cached = graphCache.get(key);
  if (cached) return cached;
  const graph = validateGraph(record.nodes, record.edges);
  if (graphCache.size >= GRAPH_CACHE_SIZE) graphCache.delete(graphCache.keys().next().value as string);
  graphCache.set(key, graph);
  return graph;
}

/** A pipeline the caller may see (404 otherwise), with its validated graph. */
export async function loadPipeline(
  env: Env,
  auth: AuthContext,
  id: string,
): Promise<PipelineRecord & { graph: PipelineGraph }> {
  const rows = await database(env).select().from(pipelines).where(eq(pipelines.id, id)).limit(1);
  const record = toRecord(assertVisible(rows[0], auth, "pipeline"));
  return { ...record, graph: graphOf(record) };
}
