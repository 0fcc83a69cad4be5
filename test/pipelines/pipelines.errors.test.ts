import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { AppError } from "../../src/lib/errors";
import { startPipelineRun } from "../../src/features/pipelines/pipeline-runs.service";
import {
  createPipeline,
  fakeServices,
  send,
  SMALLEST,
  uniqueName,
  useServices,
  waitForRun,
  WITH_APPROVAL,
} from "./fixtures";

const failed = (error: string) => ({ status: "failed", error });

async function rejects(
  definition: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const org = await seedOrg();
  return send(org.owner.apiKey, "POST", "/v1/pipeline", { name: uniqueName(), ...definition });
}

const input = { id: "in", type: "input", config: { name: "q" } };

describe("pipelines: invalid definitions are rejected, naming the node", () => {
  it("rejects a cycle", async () => {
    const r = await rejects({
      nodes: [
        input,
        { id: "a", type: "text", config: { text: "x" } },
        { id: "b", type: "text", config: { text: "y" } },
      ],
      edges: [
        { source: "in", target: "a" },
        { source: "a", target: "b" },
        { source: "b", target: "a" },
      ],
    });
    expect(r).toEqual({ status: 400, body: failed("node a: the pipeline has a cycle through nodes a, b") });
  });

  it("rejects dangling edges", async () => {
    expect(await rejects({ nodes: [input], edges: [{ source: "in", target: "ghost" }] })).toEqual({
      status: 400,
      body: failed("node in: an edge goes to node ghost, which does not exist"),
    });
    expect(await rejects({ nodes: [input], edges: [{ source: "ghost", target: "in" }] })).toEqual({
      status: 400,
      body: failed("node in: an edge comes from node ghost, which does not exist"),
    });
  });

  it("rejects an unknown node type and a bad config", async () => {
    expect(await rejects({ nodes: [{ id: "x", type: "teleport", config: {} }] })).toEqual({
      status: 400,
      body: failed(
        'node x: unknown node type "teleport" (known types: input, output, text, llm, knowledge_base, transformation, condition, merge, approval, wait, pipeline)',
      ),
    });
    expect(await rejects({ nodes: [input, { id: "t", type: "text", config: {} }] })).toEqual({
      status: 400,
      body: failed("node t (text): config.text: Invalid input: expected string, received undefined"),
    });
    expect(await rejects({ nodes: [input, { id: "w", type: "wait", config: { seconds: -1 } }] })).toMatchObject({
      status: 400,
      body: { error: expect.stringContaining("node w (wait): config.seconds") },
    });
  });

  it("rejects template variables that point nowhere", async () => {
    const t = (text: string, edges = [{ source: "in", target: "t" }]) =>
      rejects({ nodes: [input, { id: "t", type: "text", config: { text } }], edges });
    expect(await t("Hi {{nobody}}")).toEqual({
      status: 400,
      body: failed("node t: config.text: {{nobody}} points to node nobody, which does not exist"),
    });
    expect(await t("Hi {{in}}", [])).toEqual({
      status: 400,
      body: failed(
        "node t: config.text: {{in}} points to node in, which is not upstream of it (connect them with edges)",
      ),
    });
    expect(await t("Hi {{in.nope}}")).toEqual({
      status: 400,
      body: failed(
        'node t: config.text: {{in.nope}} points to output "nope" that node in does not have (outputs: value)',
      ),
    });
    expect(await t("Hi {{in + 1}}")).toEqual({
      status: 400,
      body: failed(
        'node t: config.text: "{{in + 1}}" is not a valid reference (use {{node_id}} or {{node_id.output}})',
      ),
    });
  });

  it("rejects references to records the caller cannot use", async () => {
    const other = await seedOrg();
    const foreign = await createPipeline(other.owner.apiKey, SMALLEST);
    expect(
      await rejects({
        nodes: [input, { id: "sub", type: "pipeline", config: { pipeline_id: foreign } }],
        edges: [{ source: "in", target: "sub" }],
      }),
    ).toEqual({
      status: 400,
      body: failed(`node sub: pipeline ${foreign} does not exist or you cannot use it`),
    });
    expect(
      await rejects({
        nodes: [input, { id: "ask", type: "llm", config: { prompt: "hi", connection_id: "cccccccccccccccccccccccc" } }],
      }),
    ).toEqual({
      status: 400,
      body: failed("node ask: connection cccccccccccccccccccccccc does not exist or you cannot use it"),
    });
    expect(
      await rejects({
        nodes: [
          input,
          {
            id: "kb",
            type: "knowledge_base",
            config: { knowledge_base_id: "aaaaaaaaaaaaaaaaaaaaaaaa", query: "{{in}}" },
          },
        ],
        edges: [{ source: "in", target: "kb" }],
      }),
    ).toEqual({
      status: 400,
      body: failed("node kb: knowledge base aaaaaaaaaaaaaaaaaaaaaaaa does not exist or you cannot use it"),
    });
    const restore = useServices((e) =>
      fakeServices(e, {
        checkTransformation: async (_auth, id) => `transformation ${id} does not exist or you cannot use it`,
      }),
    );
    try {
      expect(
        await rejects({
          nodes: [
            input,
            { id: "f", type: "transformation", config: { transformation_id: "bbbbbbbbbbbbbbbbbbbbbbbb" } },
          ],
        }),
      ).toEqual({
        status: 400,
        body: failed("node f: transformation bbbbbbbbbbbbbbbbbbbbbbbb does not exist or you cannot use it"),
      });
    } finally {
      restore();
    }
  });

  it("rejects duplicate ids and names, a bad branch name, and a taken pipeline name", async () => {
    expect(await rejects({ nodes: [input, input] })).toEqual({
      status: 400,
      body: failed("node in: the id is used by more than one node"),
    });
    expect(await rejects({ nodes: [input, { id: "in2", type: "input", config: { name: "q" } }] })).toEqual({
      status: 400,
      body: failed('node in2: input name "q" is already used by node in'),
    });
    expect(
      await rejects({
        nodes: [
          input,
          { id: "c", type: "condition", config: { left: "{{in}}", operator: "equals", right: "x" } },
          { id: "t", type: "text", config: { text: "x" } },
        ],
        edges: [
          { source: "in", target: "c" },
          { source: "c", target: "t", source_output: "maybe" },
        ],
      }),
    ).toEqual({ status: 400, body: failed('node c: a condition\'s edges leave from "true" or "false", not "maybe"') });
    expect(await rejects({ nodes: [] })).toEqual({
      status: 400,
      body: failed("nodes: a pipeline needs at least one node"),
    });

    const org = await seedOrg();
    const name = uniqueName();
    await createPipeline(org.owner.apiKey, SMALLEST, name);
    expect(await send(org.owner.apiKey, "POST", "/v1/pipeline", { name, ...SMALLEST })).toEqual({
      status: 409,
      body: failed(`a pipeline named "${name}" already exists`),
    });
  });

  it("answers fetch without id or name, and unknown ids, with the contract's errors", async () => {
    const org = await seedOrg();
    expect(await send(org.owner.apiKey, "GET", "/v1/pipeline")).toEqual({
      status: 400,
      body: failed("Either id or name must be provided"),
    });
    expect(await send(org.owner.apiKey, "GET", "/v1/pipeline?id=000000000000000000000000")).toEqual({
      status: 404,
      body: failed("pipeline not found"),
    });
    expect(await send(org.owner.apiKey, "GET", "/v1/pipeline?id=nope")).toEqual({
      status: 400,
      body: failed("id: must be a 24-character hex id"),
    });
    expect(await send(org.owner.apiKey, "DELETE", "/v1/pipeline/000000000000000000000000")).toEqual({
      status: 404,
      body: failed("pipeline not found"),
    });
  });
});

describe("pipelines: run errors", () => {
  it("rejects missing, mistyped and unknown inputs", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [input, { id: "n", type: "input", config: { name: "n", type: "number" } }],
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { n: 1 } })).toEqual({
      status: 400,
      body: failed("inputs.q: missing (input node in requires it)"),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x", n: "many" } })).toEqual({
      status: 400,
      body: failed("inputs.n: must be a number (input node n)"),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x", n: 1, extra: 2 } })).toEqual({
      status: 400,
      body: failed('inputs.extra: the pipeline has no input named "extra"'),
    });
    expect(
      await send(key, "POST", `/v1/pipeline/${id}/bulk-run`, {
        runs: [{ inputs: { q: "x", n: 1 } }, { inputs: { n: 1 } }],
      }),
    ).toEqual({
      status: 400,
      body: failed("runs.1.inputs.q: missing (input node in requires it)"),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/bulk-run`, { runs: [] })).toEqual({
      status: 400,
      body: failed("runs: must hold at least one run"),
    });
    const history = await send(key, "GET", `/v1/pipeline/${id}/runs`);
    expect(history.body.total).toBe(0);
  });

  it("refuses resume, pause and terminate in the wrong state, naming the run and its state", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, SMALLEST);
    const done = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } });
    const runId = String(done.body.run_id);
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual({
      status: 409,
      body: failed(`run ${runId} is completed and is not paused; no run was resumed`),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual({
      status: 409,
      body: failed(`run ${runId} is completed and cannot be terminated: only a queued, running or paused run can`),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual({
      status: 409,
      body: failed(`run ${runId} is completed and cannot be paused: only a queued or running run can`),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: ["000000000000000000000000"] })).toEqual({
      status: 404,
      body: failed("run 000000000000000000000000 not found"),
    });
    expect(await send(key, "GET", `/v1/pipeline/${id}/run/status/000000000000000000000000`)).toEqual({
      status: 404,
      body: failed("run 000000000000000000000000 not found"),
    });
    expect(await send(key, "POST", `/v1/pipeline/${id}/terminate`, {})).toMatchObject({
      status: 400,
      body: { status: "failed", error: expect.stringContaining("run_id") },
    });
  });

  it("resumes several runs all or nothing: one that is not paused stops them all", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, WITH_APPROVAL);
    const a = String((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "a" } })).body.run_id);
    const b = String((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "b" } })).body.run_id);
    await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: b });
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [a, b] })).toEqual({
      status: 409,
      body: failed(`run ${b} is terminated and is not paused; no run was resumed`),
    });
    expect((await send(key, "GET", `/v1/pipeline/${id}/run/status/${a}`)).body.status).toBe("paused");
  });

  it("fails a run at the per-node timeout and at the step limit, with a clear error", async () => {
    const restore = useServices((e) =>
      fakeServices(e, {
        chat: (_auth, request) =>
          new Promise((_, reject) => {
            request.signal.addEventListener("abort", () => reject(new Error("aborted")));
          }),
      }),
    );
    try {
      const org = await seedOrg();
      const key = org.owner.apiKey;
      const slow = await createPipeline(key, {
        nodes: [input, { id: "ask", type: "llm", config: { prompt: "{{in}}", timeout_seconds: 1 } }],
        edges: [{ source: "in", target: "ask" }],
      });
      expect((await send(key, "POST", `/v1/pipeline/${slow}/run`, { inputs: { q: "x" } })).body).toMatchObject({
        status: "failed",
        state: "failed",
        error: "node ask timed out after 1 seconds",
      });

      const capped = await send(key, "POST", "/v1/pipeline", { name: uniqueName(), ...SMALLEST, max_steps: 2 });
      const run = await send(key, "POST", `/v1/pipeline/${capped.body.id}/run`, { inputs: { q: "x" } });
      expect(run.body).toMatchObject({
        status: "failed",
        error: "run exceeded its limit of 2 steps (max_steps) before node out could run",
      });
      const status = await waitForRun(key, String(capped.body.id), String(run.body.run_id));
      expect(status).toMatchObject({
        status: "failed",
        error: "run exceeded its limit of 2 steps (max_steps) before node out could run",
      });
    } finally {
      restore();
    }
  });

  it("refuses a run over the organization's concurrent-run limit", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [input, { id: "nap", type: "wait", config: { seconds: 600 } }],
      edges: [{ source: "in", target: "nap" }],
    });
    const limited = { ...env, PIPELINE_MAX_CONCURRENT_RUNS: "1" };
    const auth = { userId: org.owner.userId, orgId: org.orgId, role: "owner" as const, via: "api_key" as const };
    const first = await startPipelineRun(limited, auth, id, { q: "x" }, { background: true });
    await waitForRun(key, id, first.run_id, () => true);
    const error = await startPipelineRun(limited, auth, id, { q: "y" }, { background: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).status).toBe(429);
    expect((error as AppError).message).toBe(
      "your organization has 1 pipeline runs in progress; the limit is 1 concurrent runs",
    );
    await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: first.run_id });
    const after = await startPipelineRun(limited, auth, id, { q: "z" }, { background: true });
    await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: after.run_id });
  });

  it("forbids viewers to create or run, and members to delete others' pipelines", async () => {
    const org = await seedOrg();
    const id = await createPipeline(org.owner.apiKey, SMALLEST);
    const viewer = await org.addMember("viewer");
    expect(await send(viewer.apiKey, "POST", "/v1/pipeline", { name: uniqueName(), ...SMALLEST })).toEqual({
      status: 403,
      body: failed("viewers cannot create or change records"),
    });
    expect(await send(viewer.apiKey, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } })).toEqual({
      status: 403,
      body: failed("viewers cannot run or control pipeline runs"),
    });
    const member = await org.addMember("member");
    expect(await send(member.apiKey, "DELETE", `/v1/pipeline/${id}`)).toEqual({
      status: 403,
      body: failed("only the pipeline's owner or an admin can change it"),
    });
    expect((await send(viewer.apiKey, "GET", `/v1/pipeline?id=${id}`)).status).toBe(200);
  });
});

describe("pipelines: size bounds", () => {
  it("rejects a definition or inputs too large to store, with a 400 naming the field", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const big = "x".repeat(30_000);
    const nodes = Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, type: "text", config: { text: big } }));
    expect(await send(key, "POST", "/v1/pipeline", { name: uniqueName(), nodes })).toEqual({
      status: 400,
      body: failed("nodes: the definition (nodes and edges) must serialize to at most 1048576 bytes"),
    });
    const id = await createPipeline(key, SMALLEST);
    const huge = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "y".repeat(1_100_000) } });
    expect(huge).toEqual({ status: 400, body: failed("inputs: must serialize to at most 1048576 bytes") });
  });
});
