import { and, desc, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { connections, users } from "../../db/schema/identity";
import { pipelines } from "../../db/schema/pipelines";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { assertCanCreate, assertVisible, assertWritable, listEnvelope, resolveFetchTarget, type FetchQueryInput, ownedRecordFields } from "../../lib/ownership";
import { validateGraph, type PipelineGraph } from "./pipeline-graph";
import { nodeServicesProvider, parseKnowledgeBaseQuery, type NodeServices } from "./pipeline-services";
import { deleteRunIndex, terminateActiveRuns } from "./pipeline-run-control";
import { runLimits } from "./run-admission";
import { checkRunTree } from "./run-tree-bounds";
import type { PipelineCreateInput, PipelineEdge, PipelineNode } from "./pipelines.schemas";

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
  ownerId: string;
  orgId: string;
  createdAt: string;
  updatedAt: string;
}

function toRecord(row: PipelineRow): PipelineRecord {
  return {
    ...ownedRecordFields(row),
    nodes: JSON.parse(row.nodes) as PipelineNode[],
    edges: JSON.parse(row.edges) as PipelineEdge[],
    settings: { max_steps: DEFAULT_MAX_STEPS, node_timeout_seconds: DEFAULT_NODE_TIMEOUT_SECONDS, ...(JSON.parse(row.settings) as Partial<PipelineSettings>) },
  };
}

/** Checks that every record a node names exists and that the caller may use it; messages name the node. */
async function checkReferences(env: Env, auth: AuthContext, graph: PipelineGraph, services: NodeServices): Promise<void> {
  const db = database(env);
  for (const node of graph.nodes) {
    if (node.type === "pipeline") {
      const rows = await db.select({ orgId: pipelines.orgId }).from(pipelines).where(eq(pipelines.id, node.config.pipeline_id)).limit(1);
      if (rows[0]?.orgId !== auth.orgId) throw badRequest(`node ${node.id}: pipeline ${node.config.pipeline_id} does not exist or you cannot use it`);
    } else if (node.type === "knowledge_base") {
      // The query is a template; its options are checked now with a stand-in query text.
      const options = parseKnowledgeBaseQuery("query", { search_metadata: node.config.search_metadata, config: node.config.config });
      if (!options.ok) throw badRequest(`node ${node.id} (knowledge_base): config.${options.problem}`);
      const why = await services.checkKnowledgeBase(auth, node.config.knowledge_base_id);
      if (why) throw badRequest(`node ${node.id}: ${why}`);
    } else if (node.type === "transformation") {
      const why = await services.checkTransformation(auth, node.config.transformation_id);
      if (why) throw badRequest(`node ${node.id}: ${why}`);
    } else if (node.type === "llm" && node.config.connection_id) {
      const rows = await db.select({ orgId: connections.orgId }).from(connections).where(eq(connections.id, node.config.connection_id)).limit(1);
      if (rows[0]?.orgId !== auth.orgId) throw badRequest(`node ${node.id}: connection ${node.config.connection_id} does not exist or you cannot use it`);
    } else if (node.type === "approval" && node.config.approvers?.length) {
      const approvers = node.config.approvers;
      const rows = await db.select({ id: users.id }).from(users).where(and(eq(users.orgId, auth.orgId), inArray(users.id, approvers)));
      const known = new Set(rows.map((r) => r.id));
      const stranger = approvers.find((id) => !known.has(id));
      if (stranger) throw badRequest(`node ${node.id}: approver ${stranger} is not a user of your organization`);
    }
  }
}

export async function createPipeline(env: Env, auth: AuthContext, input: PipelineCreateInput, services: NodeServices = nodeServicesProvider.create(env)): Promise<{ status: "success"; id: string }> {
  assertCanCreate(auth);
  const graph = validateGraph(input.nodes, input.edges);
  await checkReferences(env, auth, graph, services);
  await checkRunTree(env, auth.orgId, graph, runLimits(env));
  const db = database(env);
  const taken = await db
    .select({ id: pipelines.id })
    .from(pipelines)
    .where(and(eq(pipelines.orgId, auth.orgId), eq(pipelines.ownerId, auth.userId), eq(pipelines.name, input.name)))
    .limit(1);
  if (taken[0]) throw conflict(`a pipeline named "${input.name}" already exists`);
  const now = new Date().toISOString();
  const id = newId();
  const settings: Partial<PipelineSettings> = {};
  if (input.max_steps !== undefined) settings.max_steps = input.max_steps;
  if (input.node_timeout_seconds !== undefined) settings.node_timeout_seconds = input.node_timeout_seconds;
  // Two creations racing for one name: the unique index decides.
  await writeUnique(
    () =>
      db.insert(pipelines).values({
        id,
        orgId: auth.orgId,
        ownerId: auth.userId,
        name: input.name,
        description: input.description,
        nodes: JSON.stringify(input.nodes),
        edges: JSON.stringify(input.edges),
        settings: JSON.stringify(settings),
        createdAt: now,
        updatedAt: now,
      }),
    `a pipeline named "${input.name}" already exists`,
  );
  return { status: "success", id };
}

/**
 * Validated graphs by pipeline id. Definitions never change after creation, so a graph checked
 * once is reused by every later run in this isolate (the row is still read, for tenancy).
 */
const graphCache = new Map<string, PipelineGraph>();
const GRAPH_CACHE_SIZE = 500;

function graphOf(record: PipelineRecord): PipelineGraph {
  const cached = graphCache.get(record._id);
  if (cached) return cached;
  const graph = validateGraph(record.nodes, record.edges);
  if (graphCache.size >= GRAPH_CACHE_SIZE) graphCache.delete(graphCache.keys().next().value as string);
  graphCache.set(record._id, graph);
  return graph;
}

/** A pipeline the caller may see (404 otherwise), with its validated graph. */
export async function loadPipeline(env: Env, auth: AuthContext, id: string): Promise<PipelineRecord & { graph: PipelineGraph }> {
  const rows = await database(env).select().from(pipelines).where(eq(pipelines.id, id)).limit(1);
  const record = toRecord(assertVisible(rows[0], auth, "pipeline"));
  return { ...record, graph: graphOf(record) };
}

export async function fetchPipeline(env: Env, auth: AuthContext, query: FetchQueryInput): Promise<{ status: "success"; object: PipelineRecord }> {
  const target = await resolveFetchTarget(env, auth, query);
  const db = database(env);
  const rows =
    "id" in target
      ? await db.select().from(pipelines).where(eq(pipelines.id, target.id)).limit(1)
      : await db
          .select()
          .from(pipelines)
          .where(and(eq(pipelines.orgId, auth.orgId), eq(pipelines.ownerId, target.ownerId), eq(pipelines.name, target.name)))
          .limit(1);
  return { status: "success", object: toRecord(assertVisible(rows[0], auth, "pipeline")) };
}

export async function listPipelines(env: Env, auth: AuthContext, includeShared: boolean, verbose: boolean) {
  const db = database(env);
  const where = includeShared ? eq(pipelines.orgId, auth.orgId) : and(eq(pipelines.orgId, auth.orgId), eq(pipelines.ownerId, auth.userId));
  const rows = await db.select().from(pipelines).where(where).orderBy(desc(pipelines.createdAt), desc(pipelines.id)).limit(1000);
  return listEnvelope(rows.map(toRecord), verbose);
}

/** Deletes the definition; runs in progress are terminated first, and the run history goes with it. */
export async function deletePipeline(env: Env, auth: AuthContext, id: string): Promise<{ status: "success" }> {
  const db = database(env);
  const rows = await db.select().from(pipelines).where(eq(pipelines.id, id)).limit(1);
  const row = assertVisible(rows[0], auth, "pipeline");
  assertWritable(row, auth, "pipeline");
  await terminateActiveRuns(env, id);
  const deleted = await db.delete(pipelines).where(and(eq(pipelines.id, id), eq(pipelines.orgId, auth.orgId))).returning({ id: pipelines.id });
  if (deleted.length === 0) throw notFound("pipeline");
  await deleteRunIndex(env, id);
  return { status: "success" };
}
