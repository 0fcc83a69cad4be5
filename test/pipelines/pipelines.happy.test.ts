import { env } from "cloudflare:test";
import { runPipeline, runPipelineForUser, runStub } from "../../src/features/pipelines/pipeline-runs.service";
import { AppError } from "../../src/lib/errors";
import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { createPipeline, send, SMALLEST, uniqueName, waitForRun, WITH_APPROVAL } from "./fixtures";

describe("pipelines: happy paths", () => {
  it("runs the smallest pipeline exactly as the issue writes it", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const created = await send(key, "POST", "/v1/pipeline", { name: uniqueName(), description: "greets", ...SMALLEST });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ status: "success", id: expect.stringMatching(/^[0-9a-f]{24}$/) });
    const run = await send(key, "POST", `/v1/pipeline/${created.body.id}/run`, { inputs: { q: "world" } });
    expect(run.status).toBe(200);
    expect(run.body).toEqual({
      status: "success",
      run_id: expect.stringMatching(/^[0-9a-f]{24}$/),
      outputs: { answer: "Hello world" },
    });
  });

  it("pauses at an approval node and goes on from there when resumed", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, WITH_APPROVAL);
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "world" } });
    expect(run.body).toMatchObject({ status: "success", state: "paused" });
    const runId = String(run.body.run_id);
    const paused = await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`);
    expect(paused.body).toMatchObject({ status: "paused", run_id: runId, error: null });
    const nodes = paused.body.nodes as { id: string; status: string }[];
    expect(nodes.find((n) => n.id === "gate")?.status).toBe("awaiting_approval");
    expect(nodes.find((n) => n.id === "greet")?.status).toBe("pending");

    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({
      status: 200,
      body: { status: "success" },
    });
    const done = await waitForRun(key, id, runId);
    expect(done).toMatchObject({ status: "completed", result: { answer: "Hello world" }, error: null });
    const inNode = (done.nodes as { id: string; attempts: number }[]).find((n) => n.id === "in");
    expect(inNode?.attempts).toBe(1);
  });
});

describe("pipelines: definitions and run control", () => {
  it("fetches by id and by name, lists (own, shared, verbose) and deletes", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const name = uniqueName();
    const id = await createPipeline(key, SMALLEST, name);
    const byId = await send(key, "GET", `/v1/pipeline?id=${id}`);
    expect(byId.body).toMatchObject({
      status: "success",
      object: {
        _id: id,
        name,
        description: "test",
        ownerId: org.owner.userId,
        orgId: org.orgId,
        graph: { nodes: SMALLEST.nodes, edges: SMALLEST.edges },
        edges: SMALLEST.edges,
      },
    });
    expect(byId.body.object).toHaveProperty("createdAt");
    const byName = await send(key, "GET", `/v1/pipeline?name=${encodeURIComponent(name)}`);
    expect((byName.body.object as { _id: string })._id).toBe(id);

    const member = await org.addMember("member");
    const theirs = await createPipeline(member.apiKey, SMALLEST);
    const own = await send(key, "GET", "/v1/pipelines");
    expect(own.body).toEqual({ status: "success", object_ids: [id], objects: [] });
    const shared = await send(key, "GET", "/v1/pipelines?include_shared=true&verbose=true");
    expect(shared.body.object_ids).toEqual(expect.arrayContaining([id, theirs]));
    expect((shared.body.objects as unknown[]).length).toBe(2);

    expect(await send(key, "DELETE", `/v1/pipeline/${id}`)).toEqual({ status: 200, body: { status: "success" } });
    expect((await send(key, "GET", `/v1/pipeline?id=${id}`)).status).toBe(404);
  });

  it("accepts a definition sent as form fields holding JSON", async () => {
    const org = await seedOrg();
    const response = await call(
      "/v1/pipeline",
      form(
        { name: uniqueName(), nodes: JSON.stringify(SMALLEST.nodes), edges: JSON.stringify(SMALLEST.edges) },
        bearer(org.owner.apiKey),
      ),
    );
    expect(response.status).toBe(200);
    const id = ((await response.json()) as { id: string }).id;
    const run = await call(`/v1/pipeline/${id}/run`, form({ "inputs.q": "form" }, bearer(org.owner.apiKey)));
    expect(await run.json()).toMatchObject({ outputs: { answer: "Hello form" } });
  });

  it("starts a background run, answers its id at once, and reports it completed", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, SMALLEST);
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "later" }, background: true });
    expect(run.body).toEqual({
      status: "success",
      run_id: expect.stringMatching(/^[0-9a-f]{24}$/),
      state: "queued",
      outputs: {},
    });
    const done = await waitForRun(key, id, String(run.body.run_id));
    expect(done).toMatchObject({
      status: "completed",
      result: { answer: "Hello later" },
      error: null,
      state: "completed",
    });
    const nodes = done.nodes as { id: string; status: string; outputs: unknown; duration_ms: number }[];
    expect(nodes.map((n) => [n.id, n.status])).toEqual([
      ["in", "completed"],
      ["greet", "completed"],
      ["out", "completed"],
    ]);
    expect(nodes[1].outputs).toEqual({ text: "Hello later" });
    expect(typeof nodes[1].duration_ms).toBe("number");
  });

  it("streams outputs as server-sent events", async () => {
    const org = await seedOrg();
    const id = await createPipeline(org.owner.apiKey, SMALLEST);
    const response = await call(
      `/v1/pipeline/${id}/run`,
      json({ inputs: { q: "stream" }, stream: true }, bearer(org.owner.apiKey)),
    );
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const text = await response.text();
    const events = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
    expect(events.map((e) => e.type)).toEqual(["stream", "result"]);
    expect(events[1]).toEqual({
      type: "result",
      run_id: expect.any(String),
      output_name: "answer",
      output_value: "Hello stream",
    });
  });

  it("ends a stream with a paused event when the run stops at an approval", async () => {
    const org = await seedOrg();
    const id = await createPipeline(org.owner.apiKey, WITH_APPROVAL);
    const response = await call(
      `/v1/pipeline/${id}/run`,
      json({ inputs: { q: "s" }, stream: true }, bearer(org.owner.apiKey)),
    );
    const events = (await response.text())
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
    expect(events).toEqual([{ type: "paused", run_id: expect.stringMatching(/^[0-9a-f]{24}$/), state: "paused" }]);
  });

  it("bulk-runs (both spellings) and pages the run history newest first", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, SMALLEST);
    const bulk = await send(key, "POST", `/v1/pipeline/${id}/bulk-run`, {
      runs: [{ inputs: { q: "a" } }, { inputs: { q: "b" } }],
    });
    expect(bulk.body).toEqual({ status: "success", run_ids: [expect.any(String), expect.any(String)] });
    const bulk2 = await send(key, "POST", `/v1/pipeline/${id}/bulk_run`, { runs: [{ inputs: { q: "c" } }] });
    const ids = [...(bulk.body.run_ids as string[]), ...(bulk2.body.run_ids as string[])];
    for (const runId of ids) await waitForRun(key, id, runId);
    // Both bulk calls may fall in the same millisecond; rather than sleep between them, the first
    // call's runs are dated an hour back in the run index (the index sync never writes created_at).
    const older = new Date(Date.now() - 3_600_000).toISOString();
    await env.DB.prepare("UPDATE pipeline_runs SET created_at = ? WHERE id IN (?, ?)")
      .bind(older, ...(bulk.body.run_ids as string[]))
      .run();
    const results = await Promise.all(ids.map((runId) => send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`)));
    expect(results.map((r) => (r.body.result as { answer: string }).answer)).toEqual(["Hello a", "Hello b", "Hello c"]);

    const page1 = await send(key, "GET", `/v1/pipeline/${id}/runs?page_size=2`);
    expect(page1.body).toMatchObject({ status: "success", page: 1, page_size: 2, total: 3 });
    const page2 = await send(key, "GET", `/v1/pipeline/${id}/runs?page=2&page_size=2`);
    const listed = [
      ...(page1.body.runs as { run_id: string; status: string }[]),
      ...(page2.body.runs as { run_id: string; status: string }[]),
    ];
    expect(listed[0].run_id).toBe(ids[2]);
    expect(new Set(listed.map((r) => r.run_id))).toEqual(new Set(ids));
    expect(listed.every((r) => r.status === "completed")).toBe(true);
  });

  it("pauses a running run, resumes it, and terminates a paused one", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "q" } },
        { id: "nap", type: "wait", config: { seconds: 60 } },
        { id: "out", type: "output", config: { name: "answer", value: "{{nap}}" } },
      ],
      edges: [
        { source: "in", target: "nap" },
        { source: "nap", target: "out" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" }, background: true });
    const runId = String(run.body.run_id);
    await waitForRun(key, id, runId, () => true);
    expect(await send(key, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual({
      status: 200,
      body: { status: "success" },
    });
    expect((await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).body.status).toBe("paused");
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({
      status: 200,
      body: { status: "success" },
    });
    expect((await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).body.status).toBe("in_progress");
    expect(await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual({
      status: 200,
      body: { status: "success" },
    });
    const ended = await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`);
    expect(ended.body).toMatchObject({ status: "terminated", error: "terminated by request" });
    const history = await send(key, "GET", `/v1/pipeline/${id}/runs`);
    expect(history.body.runs).toMatchObject([{ run_id: runId, status: "terminated" }]);
  });
});

describe("pipelines: deletion", () => {
  it("terminates the pipeline's runs in progress when it is deleted", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, WITH_APPROVAL);
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } });
    expect(run.body.state).toBe("paused");
    expect((await send(key, "DELETE", `/v1/pipeline/${id}`)).status).toBe(200);
    const view = await runStub(env, String(run.body.run_id)).status();
    expect(view?.status).toBe("terminated");
    expect(await send(key, "GET", `/v1/pipeline/${id}/run/status/${run.body.run_id}`)).toEqual({
      status: 404,
      body: { status: "failed", error: "pipeline not found" },
    });
  });
});

describe("pipelines: the service other features call", () => {
  it("runPipelineForUser answers outputs, and a clear error when the run pauses", async () => {
    const org = await seedOrg();
    const id = await createPipeline(org.owner.apiKey, SMALLEST);
    expect(
      await runPipelineForUser(env, {
        orgId: org.orgId,
        userId: org.owner.userId,
        pipelineId: id,
        inputs: { q: "bot" },
      }),
    ).toEqual({ answer: "Hello bot" });
    const outcome = await runPipeline(
      env,
      { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "token" },
      id,
      { q: "svc" },
    );
    expect(outcome).toEqual({
      run_id: expect.any(String),
      status: "completed",
      outputs: { answer: "Hello svc" },
      error: null,
    });

    const gated = await createPipeline(org.owner.apiKey, WITH_APPROVAL);
    const paused = await runPipelineForUser(env, {
      orgId: org.orgId,
      userId: org.owner.userId,
      pipelineId: gated,
      inputs: { q: "bot" },
    }).catch((e: unknown) => e);
    expect(paused).toBeInstanceOf(AppError);
    expect((paused as AppError).message).toMatch(/^pipeline run [0-9a-f]{24} paused \(it has an approval node\)$/);

    const stranger = await seedOrg();
    const hidden = await runPipelineForUser(env, {
      orgId: stranger.orgId,
      userId: stranger.owner.userId,
      pipelineId: id,
      inputs: { q: "x" },
    }).catch((e: unknown) => e);
    expect((hidden as AppError).status).toBe(404);
  });
});
