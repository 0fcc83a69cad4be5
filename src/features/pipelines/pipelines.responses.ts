import { z } from "@hono/zod-openapi";
import { fetchedObjectOf, objectListOf, ownedRecordShape } from "../../lib/response-schemas";

const FreeObject = z.record(z.string(), z.unknown());
const GraphNode = z
  .object({ id: z.string(), type: z.string(), config: FreeObject.openapi({ description: "The node's parameters" }) })
  .openapi("PipelineGraphNode");
const GraphEdge = z
  .object({
    source: z.string(),
    target: z.string(),
    source_output: z.string().optional(),
    target_input: z.string().optional(),
  })
  .openapi("PipelineGraphEdge");

/**
 * pipelineAnswer's fields (pipelines.service.ts). The editor document's parts (`nodes` keyed by id,
 * `canvas_metadata`, `inputs`, `outputs`) are what the author wrote and stay free-form; `graph` is Loom's typed form.
 */
export const Pipeline = z
  .object({
    ...ownedRecordShape,
    edges: z.array(GraphEdge),
    settings: z.object({ max_steps: z.number().int(), node_timeout_seconds: z.number().int() }),
    version: z.number().int(),
    branch_id: z.string(),
    mainBranch: z.string(),
    format: z.enum(["editor", "loom"]),
    nodes: z.record(z.string(), FreeObject),
    canvas_metadata: FreeObject,
    inputs: FreeObject,
    outputs: FreeObject,
    graph: z.object({ nodes: z.array(GraphNode), edges: z.array(GraphEdge) }),
  })
  .openapi("Pipeline");
export const PipelineFetched = fetchedObjectOf("Pipeline", Pipeline);
export const PipelineList = objectListOf("Pipeline", Pipeline);

const Outputs = z.record(z.string(), z.unknown());

/** A synchronous run's answer: its outputs when completed, its state otherwise (paused, running in background), its error when it failed. */
export const PipelineRunAnswer = z
  .union([
    z.object({ status: z.literal("success"), run_id: z.string(), outputs: Outputs }),
    z.object({ status: z.literal("failed"), run_id: z.string(), state: z.string(), error: z.string().nullable() }),
    z.object({ status: z.literal("success"), run_id: z.string(), state: z.string(), outputs: Outputs }),
  ])
  .openapi("PipelineRunAnswer");

export const PipelineBulkRun = z
  .object({ status: z.literal("success"), run_ids: z.array(z.string()) })
  .openapi("PipelineBulkRun");

/** run-store NodeView: one node's state in a run; its `outputs` are what the node produced, free-form. */
const RunNode = z
  .object({
    id: z.string(),
    type: z.string(),
    status: z.string(),
    outputs: Outputs.nullable(),
    error: z.string().nullable(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    duration_ms: z.number().nullable(),
    attempts: z.number().int(),
  })
  .openapi("PipelineRunNode");

export const PipelineRunStatus = z
  .object({
    status: z.string(),
    run_id: z.string(),
    pipeline_id: z.string(),
    state: z.string(),
    result: Outputs.nullable(),
    error: z.string().nullable(),
    steps: z.number().int(),
    nodes: z.array(RunNode),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
  })
  .openapi("PipelineRunStatus");

export const PipelineRunList = z
  .object({
    status: z.literal("success"),
    runs: z.array(
      z.object({
        run_id: z.string(),
        status: z.string(),
        state: z.string(),
        error: z.string().nullable(),
        started_by: z.string().nullable(),
        created_at: z.string(),
        updated_at: z.string(),
        finished_at: z.string().nullable(),
      }),
    ),
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
  })
  .openapi("PipelineRunList");

/** A created pipeline: `{status, id}` in Loom's format; the editor format also answers its branch and version. */
export const PipelineCreated = z
  .object({
    status: z.literal("success"),
    id: z.string(),
    branch_id: z.string().optional(),
    version: z.number().int().optional(),
  })
  .openapi("PipelineCreated");

/** A pipeline's new version (`POST /v1/update/pipeline/{id}`). */
export const PipelineUpdated = z
  .object({ status: z.literal("success"), id: z.string(), branch_id: z.string(), version: z.number().int() })
  .openapi("PipelineUpdated");
