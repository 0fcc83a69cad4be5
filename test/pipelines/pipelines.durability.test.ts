import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import type { AuthContext } from "../../src/env";
import type { PipelineRunObject, RunView } from "../../src/durable-objects/pipeline-run-object";
import { runStub, startPipelineRun } from "../../src/features/pipelines/pipeline-runs.service";
import { createPipeline, fakeServices, send, useServices, WITH_APPROVAL } from "./fixtures";

/** Transformation calls by id, and ids whose next call blocks until released (or forever). */
const calls: string[] = [];
const blocks = new Map<string, { promise: Promise<void>; release: () => void }>();
function block(id: string): () => void {
  let release = () => {};
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  blocks.set(id, { promise, release });
  return release;
}

const T1 = "111111111111111111111111";
const T2 = "222222222222222222222222";

const TWO_STEPS = {
  nodes: [
    { id: "in", type: "input", config: { name: "a", type: "number" } },
    { id: "t1", type: "transformation", config: { transformation_id: T1, inputs: { a: "{{in}}", b: 1 } } },
    { id: "t2", type: "transformation", config: { transformation_id: T2, inputs: { a: "{{t1.sum}}", b: 10 } } },
    { id: "out", type: "output", config: { name: "total", value: "{{t2.sum}}" } },
  ],
  edges: [
    { source: "in", target: "t1" },
    { source: "t1", target: "t2" },
    { source: "t2", target: "out" },
  ],
};

function stubOf(runId: string): DurableObjectStub<PipelineRunObject> {
  return env.PIPELINE_RUNS.get(env.PIPELINE_RUNS.idFromName(runId));
}

async function view(runId: string): Promise<RunView> {
  return (await runStub(env, runId).status()) as RunView;
}

/** Resets the run object as a crash would: in-memory state gone, storage kept. */
async function crash(runId: string): Promise<void> {
  await runInDurableObject(stubOf(runId), (_instance, state) => state.abort("simulated crash")).catch(() => undefined);
}

/**
 * Waits until a transformation call of `id` has begun, reading `runId`'s status between checks:
 * each round is a round trip to the object, not a timer. (Letting the call resolve a promise the
 * test awaits hung the crash test: the test then seems to continue inside the object's request,
 * which the simulated crash aborts.) The round count only bounds failure.
 */
async function untilCalled(id: string, runId: string): Promise<void> {
  for (let round = 0; round < 10_000; round++) {
    if (calls.includes(id)) return;
    await view(runId);
  }
  throw new Error(`transformation ${id} was never called`);
}

/**
 * Reads the run until `check` holds, waiting between reads on the object's own change signal
 * (`waitForChange` answers when the run's version moves), so no timer orders anything; the
 * round count and the RPC's timeout only bound how long a run that never gets there takes to fail.
 */
async function untilView(runId: string, check: (v: RunView) => boolean): Promise<RunView> {
  const stub = runStub(env, runId);
  for (let round = 0; round < 100; round++) {
    const current = await view(runId);
    if (check(current)) return current;
    await stub.waitForChange(current.version, 5_000);
  }
  throw new Error(`run ${runId} never reached the awaited state`);
}

function node(v: RunView, id: string) {
  return v.nodes.find((n) => n.id === id) as RunView["nodes"][number];
}

describe("pipelines: durability (alarms driven by hand)", () => {
  let restore: () => void;
  let auth: AuthContext;
  let key: string;
  beforeAll(async () => {
    restore = useServices((e) =>
      fakeServices(e, {
        async runTransformation(_auth, id, inputs) {
          calls.push(id);
          const gate = blocks.get(id);
          if (gate) {
            blocks.delete(id);
            await gate.promise;
          }
          return { sum: Number(inputs.a) + Number(inputs.b) };
        },
      }),
    );
    const org = await seedOrg();
    key = org.owner.apiKey;
    auth = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
  });
  afterAll(() => restore());

  /** A background run whose first alarm is an hour away, so only the test drives it. */
  async function startParked(pipelineId: string, inputs: Record<string, unknown>): Promise<string> {
    const started = await startPipelineRun(env, auth, pipelineId, inputs, {
      background: true,
      startDelayMs: 3_600_000,
    });
    return started.run_id;
  }

  it("loses no finished step and repeats none after a crash between steps", async () => {
    const id = await createPipeline(key, TWO_STEPS);
    const runId = await startParked(id, { a: 1 });
    calls.length = 0;
    block(T2); // t2's first call never returns: the object dies while it is in flight.
    const firstAlarm = runDurableObjectAlarm(stubOf(runId)).catch((e: unknown) => e);
    await untilCalled(T2, runId);
    expect(calls).toEqual([T1, T2]);
    const mid = await view(runId);
    expect(node(mid, "t1")).toMatchObject({ status: "completed", outputs: { sum: 2 }, attempts: 1 });
    expect(node(mid, "t2").status).toBe("running");

    await crash(runId);
    expect(String(await firstAlarm)).toContain("simulated crash");

    // A fresh instance: the lease alarm continues the run; t1 is not run again.
    expect(await runDurableObjectAlarm(stubOf(runId))).toBe(true);
    const after = await view(runId);
    expect(after).toMatchObject({ status: "completed", outputs: { total: 12 } });
    expect(calls).toEqual([T1, T2, T2]);
    expect(node(after, "t1").attempts).toBe(1);
    expect(node(after, "t2").attempts).toBe(2);
  });

  it("re-attaches to the sub-pipeline run it started when a crash interrupts a pipeline node", async () => {
    const child = await createPipeline(key, TWO_STEPS);
    const parent = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "a", type: "number" } },
        { id: "sub", type: "pipeline", config: { pipeline_id: child, inputs: { a: "{{in}}" } } },
        { id: "out", type: "output", config: { name: "total", value: "{{sub.total}}" } },
      ],
      edges: [
        { source: "in", target: "sub" },
        { source: "sub", target: "out" },
      ],
    });
    const runId = await startParked(parent, { a: 5 });
    calls.length = 0;
    const release = block(T1);
    const firstAlarm = runDurableObjectAlarm(stubOf(runId)).catch((e: unknown) => e);
    await untilCalled(T1, runId);
    await crash(runId);
    await firstAlarm;

    const secondAlarm = runDurableObjectAlarm(stubOf(runId));
    // The fresh instance has launched the node again (with the child run id it persisted) while the
    // child's step is still blocked; only then does the child finish.
    await untilView(runId, (v) => node(v, "sub").attempts === 2);
    release(); // the child run, alive in its own object, finishes its step
    expect(await secondAlarm).toBe(true);
    const after = await view(runId);
    expect(after).toMatchObject({ status: "completed", outputs: { total: 16 } });
    expect(node(after, "sub").attempts).toBe(2);
    // One child run, and each of its transformations ran once: nothing with side effects repeated.
    expect(calls).toEqual([T1, T2]);
    expect((await send(key, "GET", `/v1/pipeline/${child}/runs`)).body).toMatchObject({
      total: 1,
      runs: [{ status: "completed" }],
    });
  });

  it("is safe when its alarm runs twice at once or again afterwards", async () => {
    const id = await createPipeline(key, TWO_STEPS);
    const runId = await startParked(id, { a: 2 });
    calls.length = 0;
    await runInDurableObject(stubOf(runId), async (instance) => {
      await Promise.all([instance.alarm(), instance.alarm()]);
    });
    const done = await view(runId);
    expect(done).toMatchObject({ status: "completed", outputs: { total: 13 } });
    expect(calls).toEqual([T1, T2]);
    await runInDurableObject(stubOf(runId), (instance) => instance.alarm());
    await runDurableObjectAlarm(stubOf(runId));
    const again = await view(runId);
    expect(again.nodes.map((n) => n.attempts)).toEqual([1, 1, 1, 1]);
    expect(again.version).toBe(done.version);
    expect(calls).toEqual([T1, T2]);
  });

  it("pausing during a running branch keeps that node's result and starts nothing new; resume goes on from there", async () => {
    const id = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "a", type: "number" } },
        { id: "slow", type: "transformation", config: { transformation_id: T1, inputs: { a: "{{in}}", b: 1 } } },
        { id: "fast", type: "text", config: { text: "fast {{in}}" } },
        { id: "next", type: "text", config: { text: "{{slow.sum}} then {{fast}}" } },
        { id: "out", type: "output", config: { name: "said", value: "{{next}}" } },
      ],
      edges: [
        { source: "in", target: "slow" },
        { source: "in", target: "fast" },
        { source: "slow", target: "next" },
        { source: "fast", target: "next" },
        { source: "next", target: "out" },
      ],
    });
    const runId = await startParked(id, { a: 1 });
    calls.length = 0;
    const release = block(T1);
    const alarm = runDurableObjectAlarm(stubOf(runId));
    await untilCalled(T1, runId);
    await untilView(runId, (v) => node(v, "fast").status === "completed");
    expect(await runStub(env, runId).pause()).toMatchObject({ ok: true, run: { status: "paused" } });
    release();
    await alarm;
    const paused = await view(runId);
    expect(paused.status).toBe("paused");
    expect(node(paused, "slow")).toMatchObject({ status: "completed", outputs: { sum: 2 } });
    expect(node(paused, "next").status).toBe("pending");
    await runDurableObjectAlarm(stubOf(runId));
    expect(node(await view(runId), "next").status).toBe("pending");

    expect(await runStub(env, runId).resume()).toMatchObject({ ok: true });
    await runDurableObjectAlarm(stubOf(runId));
    const done = await runStub(env, runId).waitUntilSettled(5000);
    expect(done).toMatchObject({ status: "completed", outputs: { said: "2 then fast 1" } });
    expect(calls).toEqual([T1]);
    expect(node(done as RunView, "slow").attempts).toBe(1);
  });

  it("a run terminated while paused never runs another node and cannot be resumed", async () => {
    const id = await createPipeline(key, WITH_APPROVAL);
    const runId = await startParked(id, { q: "x" });
    await runDurableObjectAlarm(stubOf(runId));
    expect((await view(runId)).status).toBe("paused");
    expect(await runStub(env, runId).terminate()).toMatchObject({ ok: true, run: { status: "terminated" } });
    await runInDurableObject(stubOf(runId), (instance) => instance.alarm());
    expect(await runDurableObjectAlarm(stubOf(runId))).toBe(false);
    const ended = await view(runId);
    expect(ended.status).toBe("terminated");
    expect(node(ended, "gate").status).toBe("cancelled");
    expect(node(ended, "greet")).toMatchObject({ status: "pending", attempts: 0 });
    expect(await runStub(env, runId).resume()).toEqual({
      ok: false,
      status: "terminated",
      error: `run ${runId} is terminated and is not paused`,
    });
    expect((await send(key, "GET", `/v1/pipeline/${id}/runs`)).body.runs).toMatchObject([
      { run_id: runId, status: "terminated" },
    ]);
  });

  it("resuming twice: the second resume is refused and nothing runs twice", async () => {
    const id = await createPipeline(key, WITH_APPROVAL);
    const runId = await startParked(id, { q: "twice" });
    await runDurableObjectAlarm(stubOf(runId));
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({
      status: 200,
      body: { status: "success" },
    });
    const second = await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatch(
      new RegExp(`^run ${runId} is (running|completed) and is not paused; no run was resumed$`),
    );
    await runDurableObjectAlarm(stubOf(runId));
    const done = (await runStub(env, runId).waitUntilSettled(5000)) as RunView;
    expect(done).toMatchObject({ status: "completed", outputs: { answer: "Hello twice" } });
    expect(done.nodes.map((n) => n.attempts)).toEqual([1, 0, 1, 1]);
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({
      status: 409,
      body: { status: "failed", error: `run ${runId} is completed and is not paused; no run was resumed` },
    });
  });

  it("approves only the approval nodes the caller was allowed to approve", async () => {
    const id = await createPipeline(key, WITH_APPROVAL);
    const runId = await startParked(id, { q: "gated" });
    await runDurableObjectAlarm(stubOf(runId));
    // A resume checked against a run that was not yet waiting (a race) names no nodes: refused.
    expect(await runStub(env, runId).resume()).toEqual({
      ok: false,
      status: "paused",
      error: `run ${runId} is paused and is waiting for approval at node gate, which this request does not approve`,
    });
    expect(node(await view(runId), "gate").status).toBe("awaiting_approval");
    expect(await runStub(env, runId).resume(["gate"])).toMatchObject({ ok: true, run: { status: "running" } });
    await runDurableObjectAlarm(stubOf(runId));
    expect(await runStub(env, runId).waitUntilSettled(5000)).toMatchObject({
      status: "completed",
      outputs: { answer: "Hello gated" },
    });
  });

  it("retries a missed write to the run index by alarm, so a finished run frees its slot", async () => {
    const id = await createPipeline(key, TWO_STEPS);
    const runId = await startParked(id, { a: 1 });
    await runDurableObjectAlarm(stubOf(runId));
    expect((await view(runId)).status).toBe("completed");
    // The state a failed D1 write leaves: the index still says running, a retry is pending.
    await env.DB.prepare("UPDATE pipeline_runs SET status = 'running' WHERE id = ?").bind(runId).run();
    await runInDurableObject(stubOf(runId), async (_instance, state) => {
      state.storage.sql.exec("INSERT OR REPLACE INTO index_sync (singleton, pending) VALUES (1, 1)");
      await state.storage.setAlarm(Date.now() + 30_000);
    });
    expect(await runDurableObjectAlarm(stubOf(runId))).toBe(true);
    const row = await env.DB.prepare("SELECT status FROM pipeline_runs WHERE id = ?")
      .bind(runId)
      .first<{ status: string }>();
    expect(row?.status).toBe("completed");
    // Landed: no further retry is scheduled.
    expect(await runDurableObjectAlarm(stubOf(runId))).toBe(false);
  });

  it("another organization's runs answer 404, and its requests change nothing", async () => {
    const id = await createPipeline(key, WITH_APPROVAL);
    const runId = await startParked(id, { q: "mine" });
    await runDurableObjectAlarm(stubOf(runId));
    const stranger = await seedOrg();
    const own = await createPipeline(stranger.owner.apiKey, WITH_APPROVAL);
    for (const pipelineId of [id, own]) {
      expect((await send(stranger.owner.apiKey, "GET", `/v1/pipeline/${pipelineId}/run/status/${runId}`)).status).toBe(
        404,
      );
      expect(
        (await send(stranger.owner.apiKey, "POST", `/v1/pipeline/${pipelineId}/resume`, { run_ids: [runId] })).status,
      ).toBe(404);
      expect(
        (await send(stranger.owner.apiKey, "POST", `/v1/pipeline/${pipelineId}/terminate`, { run_id: runId })).status,
      ).toBe(404);
      expect(
        (await send(stranger.owner.apiKey, "POST", `/v1/pipeline/${pipelineId}/pause`, { run_id: runId })).status,
      ).toBe(404);
    }
    expect((await view(runId)).status).toBe("paused");
  });
});
