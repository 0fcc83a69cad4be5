import { sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import type { RunStatus } from "../../db/schema/pipelines";
import { AppError } from "../../lib/errors";
import { intSetting } from "../../lib/config";

/**
 * Admission of runs into the D1 run index: the one path by which a run comes to exist, whether
 * a request starts it or a `pipeline` node does. Each admission is a single conditional INSERT
 * (or one D1 batch, which is a transaction), and D1 executes statements one at a time, so the
 * count a limit is checked against and the row that takes the slot are written atomically: two
 * requests racing for the last slot cannot both get it.
 *
 * Counted limits:
 * - runs in progress (queued or running) per organization, sub-runs included;
 * - runs ever started in one run tree (the root run and every sub-run under it);
 * - sub-pipeline nesting depth (a root run is depth 0).
 */
export interface RunLimits {
  maxConcurrent: number;
  maxDepth: number;
  maxRunsPerRoot: number;
}

/** Highest values the variables may raise the limits to; larger values are capped here. */
export const LIMIT_CAPS: RunLimits = { maxConcurrent: 10_000, maxDepth: 10, maxRunsPerRoot: 10_000 };
export const LIMIT_DEFAULTS: RunLimits = { maxConcurrent: 100, maxDepth: 5, maxRunsPerRoot: 100 };

export function runLimits(env: Env): RunLimits {
  return {
    maxConcurrent: Math.min(
      intSetting(env.PIPELINE_MAX_CONCURRENT_RUNS, LIMIT_DEFAULTS.maxConcurrent),
      LIMIT_CAPS.maxConcurrent,
    ),
    maxDepth: Math.min(intSetting(env.PIPELINE_MAX_DEPTH, LIMIT_DEFAULTS.maxDepth), LIMIT_CAPS.maxDepth),
    maxRunsPerRoot: Math.min(
      intSetting(env.PIPELINE_MAX_RUNS_PER_ROOT, LIMIT_DEFAULTS.maxRunsPerRoot),
      LIMIT_CAPS.maxRunsPerRoot,
    ),
  };
}

const activeCount = (orgId: string) =>
  sql`(SELECT count(*) FROM pipeline_runs WHERE org_id = ${orgId} AND status IN ('queued', 'running'))`;

async function countActive(env: Env, orgId: string): Promise<number> {
  const rows = await database(env).all<{ n: number }>(sql`SELECT ${activeCount(orgId)} AS n`);
  return rows[0]?.n ?? 0;
}

const overLimit = (active: number, limit: number) =>
  new AppError(
    "rate_limited",
    `your organization has ${active} pipeline runs in progress; the limit is ${limit} concurrent runs`,
  );

/**
 * Admits the root runs one request starts (one run, or a bulk run's), all or nothing: one
 * statement writes every row if all of them fit under the organization's limit, else none.
 * Throws 429 when they do not fit.
 */
export async function admitRootRuns(env: Env, auth: AuthContext, pipelineId: string, runIds: string[]): Promise<void> {
  const { maxConcurrent } = runLimits(env);
  const now = new Date().toISOString();
  // The ids travel as one JSON parameter (D1 binds at most 100 per statement).
  const admitted = await database(env).run(sql`
    INSERT INTO pipeline_runs (id, pipeline_id, org_id, started_by, status, created_at, updated_at, root_run_id, parent_run_id, depth)
    SELECT j.value, ${pipelineId}, ${auth.orgId}, ${auth.userId}, 'queued', ${now}, ${now}, j.value, NULL, 0
    FROM json_each(${JSON.stringify(runIds)}) AS j
    WHERE ${activeCount(auth.orgId)} + ${runIds.length} <= ${maxConcurrent}`);
  if (admitted.meta.changes === 0) throw overLimit(await countActive(env, auth.orgId), maxConcurrent);
}

export type ChildAdmission = { ok: true; depth: number } | { ok: false; reason: string };

/**
 * Admits a sub-pipeline run under `parentRunId`: one row, written only if the parent is in the
 * index and has not ended (a paused parent's executing nodes still finish), the child is no deeper than the depth limit, the tree has started fewer runs than its
 * limit and the organization has a free slot. A child already admitted (the parent node was
 * interrupted and re-attaches) is admitted again without counting twice.
 */
export async function admitChildRun(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  childRunId: string,
  parentRunId: string,
): Promise<ChildAdmission> {
  const limits = runLimits(env);
  const db = database(env);
  for (let attempt = 0; attempt < 2; attempt++) {
    const existing = await db.all<{ depth: number; parent_run_id: string | null; org_id: string }>(
      sql`SELECT depth, parent_run_id, org_id FROM pipeline_runs WHERE id = ${childRunId}`,
    );
    if (existing[0]) {
      if (existing[0].parent_run_id !== parentRunId || existing[0].org_id !== auth.orgId)
        return { ok: false, reason: `run id ${childRunId} is already in use` };
      return { ok: true, depth: existing[0].depth };
    }
    const now = new Date().toISOString();
    const admitted = await db.all<{ depth: number }>(sql`
      INSERT INTO pipeline_runs (id, pipeline_id, org_id, started_by, status, created_at, updated_at, root_run_id, parent_run_id, depth)
      SELECT ${childRunId}, ${pipelineId}, p.org_id, ${auth.userId}, 'queued', ${now}, ${now}, p.root_run_id, p.id, p.depth + 1
      FROM pipeline_runs p
      WHERE p.id = ${parentRunId} AND p.org_id = ${auth.orgId} AND p.root_run_id IS NOT NULL
        AND p.status IN ('queued', 'running', 'paused')
        AND p.depth + 1 <= ${limits.maxDepth}
        AND (SELECT count(*) FROM pipeline_runs r WHERE r.root_run_id = p.root_run_id) < ${limits.maxRunsPerRoot}
        AND ${activeCount(auth.orgId)} < ${limits.maxConcurrent}
      RETURNING depth`);
    if (admitted[0]) return { ok: true, depth: admitted[0].depth };
    const reason = await whyRefused(env, auth.orgId, parentRunId, limits);
    if (reason) return { ok: false, reason };
    // Nothing is over a limit now: a slot was freed between the insert and the check. Try once more.
  }
  return { ok: false, reason: overLimit(await countActive(env, auth.orgId), limits.maxConcurrent).message };
}

/** Which limit refused a child run (read after the refusal, to explain it). */
async function whyRefused(env: Env, orgId: string, parentRunId: string, limits: RunLimits): Promise<string | null> {
  const db = database(env);
  const parents = await db.all<{ depth: number; root_run_id: string | null; status: RunStatus }>(
    sql`SELECT depth, root_run_id, status FROM pipeline_runs WHERE id = ${parentRunId} AND org_id = ${orgId}`,
  );
  const parent = parents[0];
  if (!parent?.root_run_id) return `the parent run ${parentRunId} is not in the run index`;
  if (parent.status === "completed" || parent.status === "failed" || parent.status === "terminated")
    return `the parent run ${parentRunId} has ended (${parent.status})`;
  if (parent.depth + 1 > limits.maxDepth)
    return `sub-pipelines may nest at most ${limits.maxDepth} deep (PIPELINE_MAX_DEPTH); this one would be ${parent.depth + 1} deep`;
  const tree = await db.all<{ n: number }>(
    sql`SELECT count(*) AS n FROM pipeline_runs WHERE root_run_id = ${parent.root_run_id}`,
  );
  const started = tree[0]?.n ?? 0;
  if (started >= limits.maxRunsPerRoot)
    return `run ${parent.root_run_id} has already started ${started} runs with its sub-pipelines; the limit is ${limits.maxRunsPerRoot} runs per root run (PIPELINE_MAX_RUNS_PER_ROOT)`;
  const active = await countActive(env, orgId);
  if (active >= limits.maxConcurrent) return overLimit(active, limits.maxConcurrent).message;
  return null;
}

/**
 * Takes the slots of paused runs about to be resumed (a paused run holds none): their index rows
 * become `running` only if all of them fit under the organization's limit together. Throws 429
 * otherwise, with nothing changed.
 */
export async function claimResumedRuns(env: Env, orgId: string, runIds: string[]): Promise<void> {
  const { maxConcurrent } = runLimits(env);
  const ids = JSON.stringify(runIds);
  const others = sql`(SELECT count(*) FROM pipeline_runs WHERE org_id = ${orgId} AND status IN ('queued', 'running') AND id NOT IN (SELECT value FROM json_each(${ids})))`;
  const claimed = await database(env).run(sql`
    UPDATE pipeline_runs SET status = 'running', updated_at = ${new Date().toISOString()}
    WHERE org_id = ${orgId} AND id IN (SELECT value FROM json_each(${ids})) AND ${others} + ${runIds.length} <= ${maxConcurrent}`);
  if (claimed.meta.changes > 0) return;
  const active = await countActive(env, orgId);
  throw new AppError(
    "rate_limited",
    `your organization has ${active} pipeline runs in progress; resuming ${runIds.length} more would pass the limit of ${maxConcurrent} concurrent runs; no run was resumed`,
  );
}

/** Writes a run's true state back to its index row (after an admission whose run object did not follow). */
export async function setIndexedStatus(
  env: Env,
  runId: string,
  status: RunStatus,
  error: string | null,
): Promise<void> {
  await database(env).run(
    sql`UPDATE pipeline_runs SET status = ${status}, error = ${error}, updated_at = ${new Date().toISOString()} WHERE id = ${runId}`,
  );
}
