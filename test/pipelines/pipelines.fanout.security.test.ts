import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import type { AuthContext, Env } from "../../src/env";
import { AppError } from "../../src/lib/errors";
import { resumeRuns, terminateRun } from "../../src/features/pipelines/pipeline-run-control";
import { bulkRunPipeline, runStub, startPipelineRun } from "../../src/features/pipelines/pipeline-runs.service";
import { productionNodeServices } from "../../src/features/pipelines/pipeline-services";
import { createPipeline, send, SMALLEST, uniqueName, useServices, NAP } from "./fixtures";

/**
 * Sub-pipeline fan-out and the concurrency limit. Limits are lowered per test by handing the
 * services an env with other variables: the root run through `startPipelineRun(limited, ...)`,
 * sub-runs through the node services every new run object is built with.
 */
const failed = (error: string) => ({ status: "failed", error });

const LEAF = SMALLEST;

/** A pipeline whose `width` pipeline nodes each run `child`, side by side. */
function fanOut(child: string, width: number, prefix = "f") {
  const ids = Array.from({ length: width }, (_, i) => `${prefix}${i}`);
  return {
    nodes: [
      { id: "in", type: "input", config: { name: "q" } },
      ...ids.map((id) => ({ id, type: "pipeline", config: { pipeline_id: child, inputs: { q: "{{in}}" } } })),
      { id: "out", type: "output", config: { name: "answer", value: ids.map((id) => `{{${id}.answer}}`).join(",") } },
    ],
    edges: [...ids.map((id) => ({ source: "in", target: id })), ...ids.map((id) => ({ source: id, target: "out" }))],
  };
}

async function count(query: string, ...params: string[]): Promise<number> {
  return (
    (await env.DB.prepare(query)
      .bind(...params)
      .first<{ n: number }>()) as { n: number }
  ).n;
}
const treeSize = (rootRunId: string) =>
  count("SELECT count(*) AS n FROM pipeline_runs WHERE root_run_id = ?", rootRunId);
const inProgress = (orgId: string) =>
  count("SELECT count(*) AS n FROM pipeline_runs WHERE org_id = ? AND status IN ('queued', 'running')", orgId);

/**
 * Waits until nothing of the organization is in progress in the run index (the state the limits
 * read). Each round waits on the in-progress runs' own objects (`waitUntilSettled` answers when
 * the run settles), not on a timer; a round that finds them settled but the index not yet synced
 * reads again at once. The round count only bounds how long a run that never settles takes to fail.
 */
async function untilIdle(orgId: string): Promise<void> {
  for (let round = 0; round < 1000; round++) {
    const open = await env.DB.prepare(
      "SELECT id FROM pipeline_runs WHERE org_id = ? AND status IN ('queued', 'running')",
    )
      .bind(orgId)
      .all<{ id: string }>();
    if (open.results.length === 0) return;
    await Promise.all(open.results.map((run) => runStub(env, run.id).waitUntilSettled(5_000)));
  }
  throw new Error("runs never settled");
}

/** Runs `body` with sub-runs admitted under `vars`; `limited` is the env for the root run. */
async function withLimits(vars: Partial<Env>, body: (limited: Env) => Promise<void>): Promise<void> {
  const restore = useServices((e) => productionNodeServices({ ...e, ...vars }, {}));
  try {
    await body({ ...env, ...vars });
  } finally {
    restore();
  }
}

describe("pipelines: sub-pipeline fan-out is bounded", () => {
  it("refuses at creation a pipeline whose sub-pipelines could start more runs than one run may", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const leaf = await createPipeline(key, LEAF);
    const middle = await createPipeline(key, fanOut(leaf, 8)); // 1 + 8 runs
    const upper = await createPipeline(key, fanOut(middle, 8)); // 1 + 8 + 64 = 73 runs: allowed
    const top = await send(key, "POST", "/v1/pipeline", { name: uniqueName(), ...fanOut(upper, 8) }); // 585 runs
    expect(top).toEqual({
      status: 400,
      body: failed(
        "nodes f0, f1, f2, f3, f4 and 3 more: one run of this pipeline could start 585 or more runs with its sub-pipelines; the limit is 100 runs per run (PIPELINE_MAX_RUNS_PER_ROOT)",
      ),
    });
    expect((await send(key, "GET", "/v1/pipelines")).body.object_ids).toHaveLength(3);
  });

  it("refuses at creation sub-pipelines nested deeper than the depth limit, naming the node", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    let inner = await createPipeline(key, LEAF);
    for (let depth = 1; depth <= 5; depth++) inner = await createPipeline(key, fanOut(inner, 1, "sub"));
    expect(await send(key, "POST", "/v1/pipeline", { name: uniqueName(), ...fanOut(inner, 1, "sub") })).toEqual({
      status: 400,
      body: failed("node sub0: its sub-pipelines nest at least 6 deep; the limit is 5 (PIPELINE_MAX_DEPTH)"),
    });
    // The deepest allowed one runs: six runs, nested five deep.
    const run = await send(key, "POST", `/v1/pipeline/${inner}/run`, { inputs: { q: "deep" } });
    expect(run.body).toMatchObject({ status: "success", outputs: { answer: "Hello deep" } });
    expect(await treeSize(String(run.body.run_id))).toBe(6);
  });

  it("stops a run tree at exactly the runs-per-run bound at run time, and the root run fails saying why", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const leaf = await createPipeline(key, LEAF);
    const upper = await createPipeline(key, fanOut(await createPipeline(key, fanOut(leaf, 8)), 8)); // 73 runs under the default bound
    await withLimits({ PIPELINE_MAX_RUNS_PER_ROOT: "20" }, async (limited) => {
      const view = await startPipelineRun(limited, auth, upper, { q: "x" }, { waitMs: 25_000 });
      expect(view.status).toBe("failed");
      expect(view.error).toMatch(
        new RegExp(
          `^node f\\d failed: (sub-pipeline run [0-9a-f]{24} failed: node f\\d failed: )?sub-pipeline run refused: run ${view.run_id} has already started 20 runs with its sub-pipelines; the limit is 20 runs per root run \\(PIPELINE_MAX_RUNS_PER_ROOT\\)$`,
        ),
      );
      await untilIdle(org.orgId);
      expect(await treeSize(view.run_id)).toBe(20);
    });
  });

  it("fails a sub-pipeline nested past a depth limit lowered after creation", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const chain = await createPipeline(
      key,
      fanOut(await createPipeline(key, fanOut(await createPipeline(key, LEAF), 1, "sub")), 1, "sub"),
    );
    await withLimits({ PIPELINE_MAX_DEPTH: "1" }, async (limited) => {
      const view = await startPipelineRun(limited, auth, chain, { q: "x" }, { waitMs: 25_000 });
      expect(view).toMatchObject({ status: "failed" });
      expect(view.error).toMatch(
        /^node sub0 failed: sub-pipeline run [0-9a-f]{24} failed: node sub0 failed: sub-pipeline run refused: sub-pipelines may nest at most 1 deep \(PIPELINE_MAX_DEPTH\); this one would be 2 deep$/,
      );
      expect(await treeSize(view.run_id)).toBe(2);
    });
  });
});

describe("pipelines: every run counts against the concurrency limit", () => {
  it("counts sub-pipeline runs: a parent cannot start more children than the organization has slots", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const parent = await createPipeline(key, fanOut(await createPipeline(key, NAP), 4, "s"));
    await withLimits({ PIPELINE_MAX_CONCURRENT_RUNS: "3" }, async (limited) => {
      const view = await startPipelineRun(limited, auth, parent, { q: "x" }, { waitMs: 25_000 });
      expect(view.status).toBe("failed");
      expect(view.error).toMatch(
        /^node s\d failed: sub-pipeline run refused: your organization has 3 pipeline runs in progress; the limit is 3 concurrent runs$/,
      );
      // The root and the two children that got a slot; the failed root terminated them, freeing every slot.
      expect(await treeSize(view.run_id)).toBe(3);
      await untilIdle(org.orgId);
      const after = await startPipelineRun(limited, auth, await createPipeline(key, LEAF), { q: "again" });
      expect(after).toMatchObject({ status: "completed", outputs: { answer: "Hello again" } });
    });
  });

  it("admits exactly the limit when many runs start at once", async () => {
    const org = await seedOrg();
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const id = await createPipeline(org.owner.apiKey, NAP);
    const limited = { ...env, PIPELINE_MAX_CONCURRENT_RUNS: "3" };
    const starts = await Promise.allSettled(
      Array.from({ length: 10 }, () => startPipelineRun(limited, auth, id, { q: "x" }, { background: true })),
    );
    const admitted = starts.filter((s) => s.status === "fulfilled");
    expect(admitted).toHaveLength(3);
    for (const s of starts) if (s.status === "rejected") expect((s.reason as AppError).status).toBe(429);
    expect(await inProgress(org.orgId)).toBe(3);
    for (const s of admitted) await terminateRun(limited, auth, id, s.value.run_id);
  });

  it("admits a bulk run whole or not at all", async () => {
    const org = await seedOrg();
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const id = await createPipeline(org.owner.apiKey, NAP);
    const limited = { ...env, PIPELINE_MAX_CONCURRENT_RUNS: "3" };
    const runs = (n: number) => Array.from({ length: n }, () => ({ inputs: { q: "x" } }));
    const tooMany = await bulkRunPipeline(limited, auth, id, runs(4)).catch((e: unknown) => e);
    expect([(tooMany as AppError).status, (tooMany as AppError).message]).toEqual([
      429,
      "your organization has 0 pipeline runs in progress; the limit is 3 concurrent runs",
    ]);
    expect(await inProgress(org.orgId)).toBe(0);
    const { run_ids } = await bulkRunPipeline(limited, auth, id, runs(3));
    expect(run_ids).toHaveLength(3);
    expect(await inProgress(org.orgId)).toBe(3);
    for (const runId of run_ids) await terminateRun(limited, auth, id, runId);
  });

  it("counts a paused run again when it is resumed: resuming past the limit is refused", async () => {
    const org = await seedOrg();
    const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
    const id = await createPipeline(org.owner.apiKey, NAP);
    const limited = { ...env, PIPELINE_MAX_CONCURRENT_RUNS: "2" };
    const start = async () => (await startPipelineRun(limited, auth, id, { q: "x" }, { background: true })).run_id;
    const paused = await start();
    expect((await send(org.owner.apiKey, "POST", `/v1/pipeline/${id}/pause`, { run_id: paused })).status).toBe(200);
    const [b, c] = [await start(), await start()];
    const refused = await resumeRuns(limited, auth, id, [paused]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect([(refused as AppError).status, (refused as AppError).message]).toEqual([
      429,
      "your organization has 2 pipeline runs in progress; resuming 1 more would pass the limit of 2 concurrent runs; no run was resumed",
    ]);
    expect((await send(org.owner.apiKey, "GET", `/v1/pipeline/${id}/run/status/${paused}`)).body.status).toBe("paused");
    await terminateRun(limited, auth, id, c);
    await resumeRuns(limited, auth, id, [paused]);
    expect(await inProgress(org.orgId)).toBe(2);
    for (const runId of [paused, b]) await terminateRun(limited, auth, id, runId);
  });
});
