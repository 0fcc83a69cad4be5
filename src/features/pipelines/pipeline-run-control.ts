import { and, count, desc, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { pipelineRuns, type RunStatus } from "../../db/schema/pipelines";
import { conflict, notFound } from "../../lib/errors";
import { assertVisible } from "../../lib/ownership";
import { assertCanRun, runStub } from "./pipeline-runs.service";
import { loadPipeline } from "./pipelines.service";

/**
 * Reading and controlling runs that exist: status, history, pause, resume, terminate. Every
 * action checks the pipeline's visibility and that the run belongs to it (404 otherwise); the run
 * object checks the state and refuses with a message naming the run and its state (409).
 */

/** The run's index row, if the caller may see it and it belongs to this pipeline (404 otherwise). */
async function visibleRun(env: Env, auth: AuthContext, pipelineId: string, runId: string) {
  await loadPipeline(env, auth, pipelineId);
  const rows = await database(env).select().from(pipelineRuns).where(eq(pipelineRuns.id, runId)).limit(1);
  const row = rows[0];
  if (!row || row.pipelineId !== pipelineId) throw notFound(`run ${runId}`);
  return assertVisible({ ...row, ownerId: row.startedBy }, auth, `run ${runId}`);
}

const PUBLIC_STATUS: Record<RunStatus, string> = { queued: "in_progress", running: "in_progress", paused: "paused", completed: "completed", failed: "failed", terminated: "terminated" };

/** The hosted platform's status shape, with each node's state, output, timing and error. */
export async function getRunStatus(env: Env, auth: AuthContext, pipelineId: string, runId: string) {
  await visibleRun(env, auth, pipelineId, runId);
  const view = await runStub(env, runId).status();
  if (!view) throw notFound(`run ${runId}`);
  return {
    status: PUBLIC_STATUS[view.status],
    run_id: view.run_id,
    pipeline_id: view.pipeline_id,
    state: view.status,
    result: view.status === "completed" ? view.outputs : Object.keys(view.outputs).length > 0 ? view.outputs : null,
    error: view.error,
    steps: view.steps,
    nodes: view.nodes,
    created_at: view.created_at,
    started_at: view.started_at,
    finished_at: view.finished_at,
  };
}

export async function listRuns(env: Env, auth: AuthContext, pipelineId: string, page: number, pageSize: number) {
  await loadPipeline(env, auth, pipelineId);
  const db = database(env);
  const where = and(eq(pipelineRuns.pipelineId, pipelineId), eq(pipelineRuns.orgId, auth.orgId));
  const [rows, totals] = await Promise.all([
    db
      .select()
      .from(pipelineRuns)
      .where(where)
      .orderBy(desc(pipelineRuns.createdAt), desc(pipelineRuns.id))
      .limit(pageSize)
      .offset((page - 1) * pageSize),
    db.select({ n: count() }).from(pipelineRuns).where(where),
  ]);
  return {
    status: "success" as const,
    runs: rows.map((r) => ({ run_id: r.id, status: PUBLIC_STATUS[r.status], state: r.status, error: r.error, started_by: r.startedBy, created_at: r.createdAt, updated_at: r.updatedAt, finished_at: r.finishedAt })),
    page,
    page_size: pageSize,
    total: totals[0]?.n ?? 0,
  };
}

export async function pauseRun(env: Env, auth: AuthContext, pipelineId: string, runId: string): Promise<{ status: "success" }> {
  assertCanRun(auth);
  await visibleRun(env, auth, pipelineId, runId);
  const result = await runStub(env, runId).pause();
  if (!result.ok) throw conflict(result.error);
  return { status: "success" };
}

export async function terminateRun(env: Env, auth: AuthContext, pipelineId: string, runId: string): Promise<{ status: "success" }> {
  assertCanRun(auth);
  await visibleRun(env, auth, pipelineId, runId);
  const result = await runStub(env, runId).terminate();
  if (!result.ok) throw conflict(result.error);
  return { status: "success" };
}

/**
 * Resumes several runs, all or nothing: every run is checked first, and if any is unknown or
 * not paused nothing is resumed and the answer names that run and its state. (A run that
 * changes state between the check and its resume is reported with the runs already resumed.)
 */
export async function resumeRuns(env: Env, auth: AuthContext, pipelineId: string, runIds: string[]): Promise<{ status: "success" }> {
  assertCanRun(auth);
  const unique = [...new Set(runIds)];
  for (const runId of unique) await visibleRun(env, auth, pipelineId, runId);
  const views = await Promise.all(unique.map((runId) => runStub(env, runId).status()));
  views.forEach((view, i) => {
    if (!view) throw notFound(`run ${unique[i]}`);
    if (view.status !== "paused") throw conflict(`run ${view.run_id} is ${view.status} and is not paused; no run was resumed`);
  });
  const resumed: string[] = [];
  for (const runId of unique) {
    const result = await runStub(env, runId).resume();
    if (!result.ok) throw conflict(`${result.error}; ${resumed.length > 0 ? `runs ${resumed.join(", ")} were resumed` : "no run was resumed"}`);
    resumed.push(runId);
  }
  return { status: "success" };
}

/** Before a pipeline is deleted: its queued, running and paused runs are terminated. */
export async function terminateActiveRuns(env: Env, pipelineId: string): Promise<void> {
  const rows = await database(env)
    .select({ id: pipelineRuns.id })
    .from(pipelineRuns)
    .where(and(eq(pipelineRuns.pipelineId, pipelineId), inArray(pipelineRuns.status, ["queued", "running", "paused"])));
  await Promise.all(rows.map((r) => runStub(env, r.id).terminate()));
}

export async function deleteRunIndex(env: Env, pipelineId: string): Promise<void> {
  await database(env).delete(pipelineRuns).where(eq(pipelineRuns.pipelineId, pipelineId));
}
