import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { EditorDocument } from "../../features/pipelines/editor-format";
import type { PipelineSettings } from "../../features/pipelines/pipeline-records";
import type { PipelineEdge, PipelineNode } from "../../features/pipelines/pipelines.schemas";

export const pipelines = sqliteTable(
  "pipelines",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    /** JSON array of `{id, type, config}`. */
    nodes: text("nodes", { mode: "json" }).$type<PipelineNode[]>().notNull(),
    /** JSON array of `{source, target, source_output?, target_input?}`. */
    edges: text("edges", { mode: "json" }).$type<PipelineEdge[]>().notNull(),
    /** JSON object of run limits (`max_steps`, `node_timeout_seconds`). */
    settings: text("settings", { mode: "json" }).$type<Partial<PipelineSettings>>().notNull().default({}),
    /** Bumped by each update; runs keep the definition they started with (copied into their run object). */
    version: integer("version").notNull().default(1),
    /** The pipeline's one branch id, answered as `branch_id` / `mainBranch` (nullable only for the migration). */
    branchId: text("branch_id"),
    /** The definition as the editor format sent it (`{nodes: {...}, canvas_metadata, inputs, outputs}`); NULL for Loom's format. */
    editor: text("editor", { mode: "json" }).$type<EditorDocument>(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("pipelines_owner_name").on(t.orgId, t.ownerId, t.name), index("pipelines_org").on(t.orgId)],
);

export const RUN_STATUSES = ["queued", "running", "paused", "completed", "failed", "terminated"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * The run index: history, tenancy, the per-organization concurrency count and the run tree
 * (root, parent, depth) that bounds sub-pipeline fan-out. Rows are admitted by the conditional
 * inserts of `run-admission.ts`, never inserted directly.
 */
export const pipelineRuns = sqliteTable(
  "pipeline_runs",
  {
    id: text("id").primaryKey(),
    pipelineId: text("pipeline_id").notNull(),
    orgId: text("org_id").notNull(),
    startedBy: text("started_by").notNull(),
    status: text("status", { enum: RUN_STATUSES }).notNull(),
    error: text("error"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at"),
    /** The root run of this run's tree: its own id for a run started by a request (nullable only for the migration). */
    rootRunId: text("root_run_id"),
    parentRunId: text("parent_run_id"),
    /** Sub-pipeline nesting: 0 for a root run, its parent's depth + 1 otherwise. */
    depth: integer("depth").notNull().default(0),
  },
  (t) => [
    index("pipeline_runs_pipeline_time").on(t.pipelineId, t.createdAt),
    index("pipeline_runs_org_status").on(t.orgId, t.status),
    index("pipeline_runs_root").on(t.rootRunId),
  ],
);
