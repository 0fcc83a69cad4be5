import { and, count, desc, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { pipelineRuns, type RunStatus } from "../../db/schema/pipelines";
import { conflict, notFound } from "../../lib/errors";
import { assertVisible } from "../../lib/ownership";
import { runStub } from "./pipeline-runs.service";
import { loadPipeline } from "./pipeline-records";
import { claimResumedRuns, setIndexedStatus } from "./run-admission";
import { assertCanApprove, assertCanControlRun, assertCanRun } from "./run-permissions";

/**
 * Reading and controlling runs that exist: status, history, pause, resume, terminate. Every
 * action checks the pipeline's visibility and that the run belongs to it (404 otherwise), then
 * who may act (`run-permissions.ts`, 403); the run object checks the state and refuses with a
 * message naming the run and its state (409).
 */

type LoadedPipeline = Awaited<ReturnType<typeof loadPipeline>>;

/** The run's index row, if the caller may see it and it belongs to this pipeline (404 otherwise). */
async function indexedRun(env: Env, auth: AuthContext, pipeline: LoadedPipeline, runId: string) {
  const rows = await database(env).select().from(pipelineRuns).where(eq(pipelineRuns.id, runId)).limit(1);
  const row = rows[0];
  if (!row || row.pipelineId !== pipeline._id) throw notFound(`run ${runId}`);
  return assertVisible({ ...row, ownerId: row.startedBy }, auth, `run ${runId}`);
}

async function visibleRun(env: Env, auth: AuthContext, pipelineId: string, runId: string) {
  return indexedRun(env, auth, await loadPipeline(env, auth, pipelineId), runId);
}

/** A run the caller may pause or terminate: visible (404), and theirs, their pipeline's or an admin's (403). */
async function controllableRun(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  runId: string,
  action: "pause" | "terminate",
) {
  assertCanRun(auth);
  const pipeline = await loadPipeline(env, auth, pipelineId);
  const run = await indexedRun(env, auth, pipeline, runId);
  assertCanControlRun(auth, pipeline, run, action);
  return run;
}

const PUBLIC_STATUS: Record<RunStatus, string> = {
  queued: "in_progress",
  running: "in_progress",
  paused: "paused",
  completed: "completed",
  failed: "failed",
  terminated: "terminated",
};

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
    runs: rows.map((r) => ({
      run_id: r.id,
      status: PUBLIC_STATUS[r.status],
      state: r.status,
      error: r.error,
      started_by: r.startedBy,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
      finished_at: r.finishedAt,
    })),
    page,
    page_size: pageSize,
    total: totals[0]?.n ?? 0,
  };
}

export async function pauseRun(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  runId: string,
): Promise<{ status: "success" }> {
  await controllableRun(env, auth, pipelineId, runId, "pause");
  const result = await runStub(env, runId).pause();
  if (!result.ok) throw conflict(result.error);
  return { status: "success" };
}

export async function terminateRun(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  runId: string,
): Promise<{ status: "success" }> {
  await controllableRun(env, auth, pipelineId, runId, "terminate");
  const result = await runStub(env, runId).terminate();
  if (!result.ok) throw conflict(result.error);
  return { status: "success" };
}

/**
 * Resumes several runs, all or nothing: every run is checked first (visible, the caller may
 * resume it, or approve it when it waits at approval nodes, paused), and if any check fails
 * nothing is resumed and the answer names that run. Resumed runs take concurrency slots again,
 * all of them or none (429). A run that changes state between the check and its resume is
 * reported with the runs already resumed.
 */
export async function resumeRuns(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  runIds: string[],
): Promise<{ status: "success" }> {
  assertCanRun(auth);
  const unique = [...new Set(runIds)];
  const pipeline = await loadPipeline(env, auth, pipelineId);
  const rows = [];
  for (const runId of unique) rows.push(await indexedRun(env, auth, pipeline, runId));
  const views = await Promise.all(unique.map((runId) => runStub(env, runId).status()));
  const waiting = views.map((view, i) => {
    if (!view) throw notFound(`run ${unique[i]}`);
    return view.nodes.filter((n) => n.status === "awaiting_approval").map((n) => n.id);
  });
  // Resuming a run stopped at approval nodes approves them: that needs the approval permission.
  rows.forEach((row, i) =>
    waiting[i].length > 0
      ? assertCanApprove(auth, pipeline, row.id, waiting[i])
      : assertCanControlRun(auth, pipeline, row, "resume"),
  );
  views.forEach((view) => {
    if (view && view.status !== "paused")
      throw conflict(`run ${view.run_id} is ${view.status} and is not paused; no run was resumed`);
  });
  await claimResumedRuns(env, auth.orgId, unique);
  const resumed: string[] = [];
  for (const [i, runId] of unique.entries()) {
    // The object approves only the nodes checked above; if others wait now, it refuses.
    const result = await runStub(env, runId)
      .resume(waiting[i])
      .catch(async (error: unknown) => {
        await restoreIndex(env, unique.slice(i));
        throw error;
      });
    if (!result.ok) {
      await restoreIndex(env, unique.slice(i));
      throw conflict(
        `${result.error}; ${resumed.length > 0 ? `runs ${resumed.join(", ")} were resumed` : "no run was resumed"}`,
      );
    }
    resumed.push(runId);
  }
  return { status: "success" };
}

/** Runs claimed as running but not resumed get their index rows back from their objects. */
async function restoreIndex(env: Env, runIds: string[]): Promise<void> {
  for (const runId of runIds) {
    const view = await runStub(env, runId).status();
    if (view) await setIndexedStatus(env, runId, view.status, view.error);
  }
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
