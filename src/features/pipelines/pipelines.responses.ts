import { z } from "@hono/zod-openapi";

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

export const PipelineRunStatus = z
  .object({
    status: z.string(),
    run_id: z.string(),
    pipeline_id: z.string(),
    state: z.string(),
    result: Outputs.nullable(),
    error: z.string().nullable(),
    steps: z.number().int(),
    nodes: z.array(z.record(z.string(), z.unknown())),
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
