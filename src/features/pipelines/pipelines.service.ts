import { and, desc, eq, inArray, sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { connections, users } from "../../db/schema/identity";
import { pipelines } from "../../db/schema/pipelines";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import {
  assertCanCreate,
  assertVisible,
  assertWritable,
  listEnvelope,
  resolveFetchTarget,
  type FetchQueryInput,
} from "../../lib/ownership";
import { validateGraph, type PipelineGraph } from "./pipeline-graph";
import { parseKnowledgeBaseQuery, type NodeServices } from "./pipeline-services";
import { deleteRunIndex, terminateActiveRuns } from "./pipeline-run-control";
import { runLimits } from "./run-admission";
import { checkRunTree } from "./run-tree-bounds";
import type { EditorDocument } from "./editor-format";
import { toEditorFormat } from "./editor-from-graph";
import type { PipelineEdge, PipelineNode } from "./pipelines.schemas";

// The stored form and the lookup live apart (pipeline-records.ts) so the run modules can load a
// pipeline without importing this service, which imports them back.
export {
  DEFAULT_MAX_STEPS,
  DEFAULT_NODE_TIMEOUT_SECONDS,
  loadPipeline,
  type PipelineRecord,
  type PipelineSettings,
} from "./pipeline-records";
import { toRecord, type PipelineRecord, type PipelineSettings } from "./pipeline-records";

/**
 * A pipeline as fetch and list answer it, in whichever format it was last written: `nodes` is
 * the editor's dict keyed by node id (what the SDK's `Pipeline.fetch` reads), with
 * `canvas_metadata`, `inputs`, `outputs`, and Loom's graph under `graph` (its `edges` also at the
 * top, as before). Written in the editor format, the document is answered as sent; written in
 * Loom's format, it is translated (`format` says which). Both carry `version`, `branch_id` and `mainBranch`.
 */
export function pipelineAnswer(record: PipelineRecord) {
  const { editor, branchId, ...rest } = record;
  const common = {
    branch_id: branchId,
    mainBranch: branchId,
    format: editor ? ("editor" as const) : ("loom" as const),
  };
  const doc = editor ?? toEditorFormat(rest.nodes, rest.edges);
  return {
    ...rest,
    ...common,
    nodes: doc.nodes,
    canvas_metadata: doc.canvas_metadata,
    inputs: doc.inputs,
    outputs: doc.outputs,
    graph: { nodes: rest.nodes, edges: rest.edges },
  };
}

/** A definition in Loom's terms, whichever format it arrived in. */
export interface PipelineDefinition {
  name?: string;
  description?: string;
  nodes: PipelineNode[];
  edges: PipelineEdge[];
  editor: EditorDocument | null;
  max_steps?: number;
  node_timeout_seconds?: number;
}

function settingsOf(input: PipelineDefinition, base: Partial<PipelineSettings> = {}): Partial<PipelineSettings> {
  const settings: Partial<PipelineSettings> = { ...base };
  if (input.max_steps !== undefined) settings.max_steps = input.max_steps;
  if (input.node_timeout_seconds !== undefined) settings.node_timeout_seconds = input.node_timeout_seconds;
  return settings;
}

/** Checks that every record a node names exists and that the caller may use it; messages name the node. */
async function checkReferences(
  env: Env,
  auth: AuthContext,
  graph: PipelineGraph,
  services: NodeServices,
): Promise<void> {
  const db = database(env);
  for (const node of graph.nodes) {
    if (node.type === "pipeline") {
      const rows = await db
        .select({ orgId: pipelines.orgId })
        .from(pipelines)
        .where(eq(pipelines.id, node.config.pipeline_id))
        .limit(1);
      if (rows[0]?.orgId !== auth.orgId)
        throw badRequest(`node ${node.id}: pipeline ${node.config.pipeline_id} does not exist or you cannot use it`);
    } else if (node.type === "knowledge_base") {
      // The query is a template; its options are checked now with a stand-in query text.
      const options = parseKnowledgeBaseQuery("query", {
        search_metadata: node.config.search_metadata,
        config: node.config.config,
      });
      if (!options.ok) throw badRequest(`node ${node.id} (knowledge_base): config.${options.problem}`);
      const why = await services.checkKnowledgeBase(auth, node.config.knowledge_base_id);
      if (why) throw badRequest(`node ${node.id}: ${why}`);
    } else if (node.type === "transformation") {
      const why = await services.checkTransformation(auth, node.config.transformation_id);
      if (why) throw badRequest(`node ${node.id}: ${why}`);
    } else if (node.type === "llm" && node.config.connection_id) {
      const rows = await db
        .select({ orgId: connections.orgId })
        .from(connections)
        .where(eq(connections.id, node.config.connection_id))
        .limit(1);
      if (rows[0]?.orgId !== auth.orgId)
        throw badRequest(
          `node ${node.id}: connection ${node.config.connection_id} does not exist or you cannot use it`,
        );
    } else if (node.type === "approval" && node.config.approvers?.length) {
      const approvers = node.config.approvers;
      const rows = await db
        .select({ id: users.id })
        .from(users)
        .where(and(eq(users.orgId, auth.orgId), inArray(users.id, approvers)));
      const known = new Set(rows.map((r) => r.id));
      const stranger = approvers.find((id) => !known.has(id));
      if (stranger) throw badRequest(`node ${node.id}: approver ${stranger} is not a user of your organization`);
    }
  }
}

export interface PipelineWriteAnswer {
  status: "success";
  id: string;
  branch_id: string;
  version: number;
}

async function assertNameFree(env: Env, orgId: string, ownerId: string, name: string): Promise<void> {
  const taken = await database(env)
    .select({ id: pipelines.id })
    .from(pipelines)
    .where(and(eq(pipelines.orgId, orgId), eq(pipelines.ownerId, ownerId), eq(pipelines.name, name)))
    .limit(1);
  if (taken[0]) throw conflict(`a pipeline named "${name}" already exists`);
}

export async function createPipeline(
  env: Env,
  auth: AuthContext,
  input: PipelineDefinition & { name: string },
  services: NodeServices,
): Promise<PipelineWriteAnswer> {
  assertCanCreate(auth);
  const graph = validateGraph(input.nodes, input.edges);
  await checkReferences(env, auth, graph, services);
  await checkRunTree(env, auth.orgId, graph, runLimits(env));
  const db = database(env);
  await assertNameFree(env, auth.orgId, auth.userId, input.name);
  const now = new Date().toISOString();
  const id = newId();
  const branchId = newId();
  const settings = settingsOf(input);
  // Two creations racing for one name: the unique index decides.
  await writeUnique(
    () =>
      db.insert(pipelines).values({
        id,
        orgId: auth.orgId,
        ownerId: auth.userId,
        name: input.name,
        description: input.description ?? "",
        nodes: input.nodes,
        edges: input.edges,
        settings,
        version: 1,
        branchId,
        editor: input.editor ?? null,
        createdAt: now,
        updatedAt: now,
      }),
    `a pipeline named "${input.name}" already exists`,
  );
  return { status: "success", id, branch_id: branchId, version: 1 };
}

/**
 * Replaces a pipeline's definition (the editor's `save`): checked like a creation, then stored
 * as the next version. Runs already started are not touched: each run object holds the
 * definition it started with. Allowed to the owner and admins; another organization's is a 404.
 */
export async function updatePipeline(
  env: Env,
  auth: AuthContext,
  id: string,
  input: PipelineDefinition,
  services: NodeServices,
): Promise<PipelineWriteAnswer> {
  const db = database(env);
  const rows = await db.select().from(pipelines).where(eq(pipelines.id, id)).limit(1);
  const row = assertVisible(rows[0], auth, "pipeline");
  assertWritable(row, auth, "pipeline");
  const graph = validateGraph(input.nodes, input.edges);
  await checkReferences(env, auth, graph, services);
  // Unlike a creation, an update can name pipelines that name this one: that cycle is refused.
  await checkRunTree(env, auth.orgId, graph, runLimits(env), id);
  const name = input.name ?? row.name;
  if (name !== row.name) await assertNameFree(env, auth.orgId, row.ownerId, name);
  const settings = settingsOf(input, row.settings);
  const updated = await writeUnique(
    () =>
      db
        .update(pipelines)
        .set({
          name,
          description: input.description ?? row.description,
          nodes: input.nodes,
          edges: input.edges,
          settings,
          editor: input.editor ?? null,
          version: sql`${pipelines.version} + 1`,
          updatedAt: new Date().toISOString(),
        })
        .where(and(eq(pipelines.id, id), eq(pipelines.orgId, auth.orgId)))
        .returning({ version: pipelines.version, branchId: pipelines.branchId }),
    `a pipeline named "${name}" already exists`,
  );
  if (updated.length === 0) throw notFound("pipeline");
  return { status: "success", id, branch_id: updated[0].branchId ?? id, version: updated[0].version };
}

export async function fetchPipeline(env: Env, auth: AuthContext, query: FetchQueryInput) {
  const target = await resolveFetchTarget(env, auth, query);
  const db = database(env);
  const rows =
    "id" in target
      ? await db.select().from(pipelines).where(eq(pipelines.id, target.id)).limit(1)
      : await db
          .select()
          .from(pipelines)
          .where(
            and(
              eq(pipelines.orgId, auth.orgId),
              eq(pipelines.ownerId, target.ownerId),
              eq(pipelines.name, target.name),
            ),
          )
          .limit(1);
  return { status: "success" as const, object: pipelineAnswer(toRecord(assertVisible(rows[0], auth, "pipeline"))) };
}

export async function listPipelines(env: Env, auth: AuthContext, includeShared: boolean, verbose: boolean) {
  const db = database(env);
  const where = includeShared
    ? eq(pipelines.orgId, auth.orgId)
    : and(eq(pipelines.orgId, auth.orgId), eq(pipelines.ownerId, auth.userId));
  const rows = await db
    .select()
    .from(pipelines)
    .where(where)
    .orderBy(desc(pipelines.createdAt), desc(pipelines.id))
    .limit(1000);
  return listEnvelope(
    rows.map((row) => pipelineAnswer(toRecord(row))),
    verbose,
  );
}

/** Deletes the definition; runs in progress are terminated first, and the run history goes with it. */
export async function deletePipeline(env: Env, auth: AuthContext, id: string): Promise<{ status: "success" }> {
  const db = database(env);
  const rows = await db.select().from(pipelines).where(eq(pipelines.id, id)).limit(1);
  const row = assertVisible(rows[0], auth, "pipeline");
  assertWritable(row, auth, "pipeline");
  await terminateActiveRuns(env, id);
  const deleted = await db
    .delete(pipelines)
    .where(and(eq(pipelines.id, id), eq(pipelines.orgId, auth.orgId)))
    .returning({ id: pipelines.id });
  if (deleted.length === 0) throw notFound("pipeline");
  await deleteRunIndex(env, id);
  return { status: "success" };
}
