import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
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
    expect(run.body).toEqual({ status: "success", run_id: expect.stringMatching(/^[0-9a-f]{24}$/), outputs: { answer: "Hello world" } });
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

    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({ status: 200, body: { status: "success" } });
    const done = await waitForRun(key, id, runId);
    expect(done).toMatchObject({ status: "completed", result: { answer: "Hello world" }, error: null });
    const inNode = (done.nodes as { id: string; attempts: number }[]).find((n) => n.id === "in");
    expect(inNode?.attempts).toBe(1);
  });
});
