import { env, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, call, seedOrg } from "../helpers";
import { createPipeline, fakeServices, send, useServices } from "./fixtures";

describe("pipelines: node types", () => {
  let restore: () => void;
  beforeAll(() => {
    restore = useServices((env) => fakeServices(env));
  });
  afterAll(() => restore());

  it("runs llm, knowledge_base and transformation nodes through their services", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "q" } },
        { id: "a", type: "input", config: { name: "a", type: "number" } },
        {
          id: "kb",
          type: "knowledge_base",
          config: { knowledge_base_id: "aaaaaaaaaaaaaaaaaaaaaaaa", query: "{{in}}", search_metadata: { top_k: 3 } },
        },
        {
          id: "ask",
          type: "llm",
          config: { system: "be brief", prompt: "Context: {{kb}} Question: {{in}}", model: "m1" },
        },
        {
          id: "add",
          type: "transformation",
          config: { transformation_id: "bbbbbbbbbbbbbbbbbbbbbbbb", inputs: { a: "{{a}}", b: 2 } },
        },
        { id: "answer", type: "output", config: { name: "answer", value: "{{ask.response}}" } },
        { id: "sum", type: "output", config: { name: "sum", value: "{{add.sum}}" } },
        { id: "hits", type: "output", config: { name: "hits", value: "{{kb.results}}" } },
      ],
      edges: [
        { source: "in", target: "kb" },
        { source: "kb", target: "ask" },
        { source: "ask", target: "answer" },
        { source: "a", target: "add" },
        { source: "add", target: "sum" },
        { source: "kb", target: "hits" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "cats", a: "40" } });
    expect(run.body).toMatchObject({
      status: "success",
      outputs: {
        answer: "[be brief] echo: Context: [1] about cats Question: cats",
        sum: 42,
        hits: [{ id: "c1", text: "about cats" }],
      },
    });
  });

  it("branches on a condition, skips the untaken branch, and merges", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "n", type: "input", config: { name: "n", type: "number" } },
        { id: "big", type: "condition", config: { left: "{{n}}", operator: "greater_than", right: "10" } },
        { id: "yes", type: "text", config: { text: "{{n}} is big" } },
        { id: "no", type: "text", config: { text: "{{n}} is small" } },
        { id: "join", type: "merge", config: {} },
        { id: "out", type: "output", config: { name: "verdict", value: "{{join}}" } },
      ],
      edges: [
        { source: "n", target: "big" },
        { source: "big", target: "yes", source_output: "true" },
        { source: "big", target: "no", source_output: "false" },
        { source: "yes", target: "join" },
        { source: "no", target: "join" },
        { source: "join", target: "out" },
      ],
    });
    const big = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { n: 12 } });
    expect(big.body).toMatchObject({ status: "success", outputs: { verdict: "12 is big" } });
    const small = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { n: 3 } });
    expect(small.body).toMatchObject({ status: "success", outputs: { verdict: "3 is small" } });
    const status = await send(key, "GET", `/v1/pipeline/${id}/run/status/${small.body.run_id}`);
    const nodes = status.body.nodes as { id: string; status: string }[];
    expect(nodes.find((x) => x.id === "yes")?.status).toBe("skipped");
    expect(nodes.find((x) => x.id === "no")?.status).toBe("completed");
  });

  it("hands edge values to named inputs and merges every taken branch with strategy all", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "x", type: "input", config: { name: "x", type: "number" } },
        { id: "y", type: "input", config: { name: "y", type: "number", required: false, default: 5 } },
        { id: "add", type: "transformation", config: { transformation_id: "bbbbbbbbbbbbbbbbbbbbbbbb" } },
        { id: "both", type: "merge", config: { strategy: "all" } },
        { id: "out", type: "output", config: { name: "all" } },
      ],
      edges: [
        { source: "x", target: "add", target_input: "a" },
        { source: "y", target: "add", target_input: "b" },
        { source: "add", target: "both", source_output: "sum" },
        { source: "x", target: "both" },
        { source: "both", target: "out" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { x: 1 } });
    expect(run.body).toMatchObject({ status: "success", outputs: { all: [6, 1] } });
  });

  it("takes a file input as a multipart file part", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "doc", type: "input", config: { name: "doc", type: "file" } },
        { id: "out", type: "output", config: { name: "file", value: "{{doc}}" } },
      ],
      edges: [{ source: "doc", target: "out" }],
    });
    const body = new FormData();
    body.append("inputs.doc", new File(["hello file"], "note.txt", { type: "text/plain" }));
    const response = await call(`/v1/pipeline/${id}/run`, { method: "POST", headers: bearer(key), body });
    expect(await response.json()).toMatchObject({
      status: "success",
      outputs: {
        file: {
          type: "file",
          raw_bytes: btoa("hello file"),
          metadata: { name: "note.txt", mime_type: "text/plain", size: 10 },
        },
      },
    });
  });

  it("sleeps at a wait node by alarm, then finishes", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "q" } },
        { id: "nap", type: "wait", config: { seconds: 0.3 } },
        { id: "out", type: "output", config: { name: "echo", value: "{{nap}}" } },
      ],
      edges: [
        { source: "in", target: "nap" },
        { source: "nap", target: "out" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "later" } });
    expect(run.body).toMatchObject({ status: "success", outputs: { echo: "later" } });
    // The run's own record, not the test's clock: the node slept 300 ms and finished only once woken.
    const nap = await runInDurableObject(
      env.PIPELINE_RUNS.get(env.PIPELINE_RUNS.idFromName(String(run.body.run_id))),
      (_instance, state) =>
        state.storage.sql
          .exec<{ status: string; started_at: number; wake_at: number; finished_at: number }>(
            "SELECT status, started_at, wake_at, finished_at FROM nodes WHERE id = 'nap'",
          )
          .one(),
    );
    expect(nap.status).toBe("completed");
    expect(nap.wake_at - nap.started_at).toBe(300);
    expect(nap.finished_at).toBeGreaterThanOrEqual(nap.wake_at);
  });

  it("runs another pipeline as a step", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const child = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "name" } },
        { id: "t", type: "text", config: { text: "Hi {{in}}!" } },
        { id: "out", type: "output", config: { name: "greeting", value: "{{t}}" } },
      ],
      edges: [
        { source: "in", target: "t" },
        { source: "t", target: "out" },
      ],
    });
    const parent = await createPipeline(key, {
      nodes: [
        { id: "in", type: "input", config: { name: "who" } },
        { id: "sub", type: "pipeline", config: { pipeline_id: child, inputs: { name: "{{in}}" } } },
        { id: "out", type: "output", config: { name: "said", value: "{{sub.greeting}} (twice: {{sub.greeting}})" } },
      ],
      edges: [
        { source: "in", target: "sub" },
        { source: "sub", target: "out" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${parent}/run`, { inputs: { who: "Ada" } });
    expect(run.body).toMatchObject({ status: "success", outputs: { said: "Hi Ada! (twice: Hi Ada!)" } });
    const childRuns = await send(key, "GET", `/v1/pipeline/${child}/runs`);
    expect(childRuns.body).toMatchObject({ total: 1, runs: [{ status: "completed" }] });
  });

  it("fails a run whose node service fails, naming the node", async () => {
    const restoreInner = useServices((env) =>
      fakeServices(env, {
        async chat() {
          throw new (class extends Error {})("boom");
        },
      }),
    );
    try {
      const org = await seedOrg();
      const key = org.owner.apiKey;
      const id = await createPipeline(key, {
        nodes: [
          { id: "in", type: "input", config: { name: "q" } },
          { id: "ask", type: "llm", config: { prompt: "{{in}}" } },
          { id: "out", type: "output", config: { name: "a", value: "{{ask}}" } },
        ],
        edges: [
          { source: "in", target: "ask" },
          { source: "ask", target: "out" },
        ],
      });
      const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } });
      expect(run.body).toMatchObject({
        status: "failed",
        state: "failed",
        error: "node ask failed: internal error while running the node",
      });
    } finally {
      restoreInner();
    }
  });
});
