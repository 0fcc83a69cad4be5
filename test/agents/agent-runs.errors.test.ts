import { afterEach, describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { fakeServices } from "../pipelines/fixtures";
import { NodeFailure } from "../../src/features/pipelines/pipeline-services";
import {
  createAgent,
  messagesOf,
  OPENAI,
  openAiKey,
  run,
  scriptedOpenAi,
  tool,
  useAgentDeps,
  v1,
  withOpenAi,
  type Body,
} from "./agent-run-fixtures";
import { FakeNetwork } from "../providers/fake-providers";
import { env } from "cloudflare:test";
import { runStub } from "../../src/features/agents/agent-runs.service";

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

const alwaysSearch = () => scriptedOpenAi(() => ({ calls: [{ name: "kb", arguments: { query: "again" } }] }));

async function agentWithKb(fields: Body = {}) {
  const org = await seedOrg();
  await withOpenAi(org);
  const kb = await createKb(org.owner.apiKey);
  await indexText(org.owner.apiKey, kb, "a.txt", "Checklists are read aloud before every flight.");
  const agentId = await createAgent(org.owner.apiKey, {
    llm_client_key: openAiKey,
    tools: { a: tool("knowledge_base", kb, { name: "kb" }) },
    ...fields,
  });
  return { org, kb, agentId };
}

describe("agent runs: limits end the run with a clear error and the steps so far", () => {
  it("step limit", async () => {
    const net = alwaysSearch();
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const { org, agentId } = await agentWithKb({ max_steps: 2 });
    const { status, body } = await run(org.owner.apiKey, agentId, { inputs: { question: "loop" } });
    expect(status).toBe(200);
    expect(body).toMatchObject({
      status: "failed",
      state: "failed",
      error: "run reached its step limit of 2 model turns (max_steps) without a final answer",
    });
    expect((body.steps as Body[]).map((s) => s.type)).toEqual(["model", "tool_result", "model", "tool_result"]);
    expect(net.to("api.openai.com")).toHaveLength(2);
  });

  it("token budget", async () => {
    const net = alwaysSearch();
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const { org, agentId } = await agentWithKb({ token_budget: 150 });
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "loop" } });
    expect(body).toMatchObject({
      status: "failed",
      error: "run used 220 tokens, its token budget is 150 (token_budget)",
      usage: { input_tokens: 200, output_tokens: 20 },
    });
    expect(body.steps as Body[]).toHaveLength(4);
  });

  it("wall time: a tool that never answers is cancelled and the run fails", async () => {
    const net = alwaysSearch();
    restore = useAgentDeps((e) => ({
      providers: { fetch: net.fetch },
      services: fakeServices(e, { queryKnowledgeBase: () => new Promise(() => undefined) }),
    }));
    const { org, agentId } = await agentWithKb({ max_wall_seconds: 1 });
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "hang" } });
    expect(body).toMatchObject({ status: "failed", error: "run exceeded its wall time of 1 seconds" });
    expect((body.steps as Body[])[0]).toMatchObject({ type: "model", tool_calls: [{ name: "kb" }] });
  });

  it("tool errors are fed back to the model up to max_tool_errors, then end the run", async () => {
    // The model keeps sending arguments that do not fit the tool's schema.
    const net = scriptedOpenAi(() => ({ calls: [{ name: "kb", arguments: { q: 3 } }] }));
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const { org, agentId } = await agentWithKb({ max_tool_errors: 1 });
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "bad args" } });
    expect(body).toMatchObject({ status: "failed", error: "run stopped after 2 tool errors (max_tool_errors is 1)" });
    const second = messagesOf(net, 1).find((m) => m.role === "tool");
    expect(second?.content).toBe("invalid arguments for kb: argument 'query' must be a non-empty string");
    expect((body.steps as Body[]).filter((s) => s.type === "tool_result").every((s) => s.is_error === true)).toBe(true);
  });

  it("a failing tool and an unknown tool name are results the model sees; the run goes on", async () => {
    const net = scriptedOpenAi((_request, i) =>
      i === 0
        ? {
            calls: [
              { name: "kb", arguments: { query: "x" } },
              { name: "nope", arguments: {} },
            ],
          }
        : { text: "recovered" },
    );
    restore = useAgentDeps((e) => ({
      providers: { fetch: net.fetch },
      services: fakeServices(e, {
        queryKnowledgeBase: () => Promise.reject(new NodeFailure("the index is rebuilding")),
      }),
    }));
    const { org, agentId } = await agentWithKb();
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "x" } });
    expect(body).toMatchObject({ status: "success", outputs: { answer: "recovered" } });
    const results = (body.steps as Body[]).filter((s) => s.type === "tool_result");
    expect(results[0]).toMatchObject({ is_error: true, content: "the tool failed: the index is rebuilding" });
    expect(results[1]).toMatchObject({ is_error: true, content: "there is no tool named 'nope'; the tools are kb" });
  });

  it("a model that fails ends the run with the provider's reason", async () => {
    const net = new FakeNetwork().on(OPENAI, () =>
      Response.json({ error: { message: "model overloaded" } }, { status: 400 }),
    );
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch, maxRetries: 0 } }));
    const { org, agentId } = await agentWithKb();
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "x" } });
    expect(body.status).toBe("failed");
    expect(String(body.error)).toMatch(/^the model failed: /);
  });
});

describe("agent records: documented failures", () => {
  it("a key in llm_client_key is refused, never echoed; bad tools and inputs are 400s in the Group A shape", async () => {
    const org = await seedOrg();
    const key = "sk-should-never-be-stored-123";
    const refused = await v1(org.owner.apiKey, "POST", "/v1/agent", {
      name: "k",
      llm_client_key: { provider: "openai", model_id: "gpt-4o", api_key: key },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.status).toBe("failed");
    expect(JSON.stringify(refused.body)).not.toContain(key);
    const badKind = await v1(org.owner.apiKey, "POST", "/v1/agent", {
      name: "k",
      tools: { t: { name: "t", value: { node_type: "shell", inputs: {} } } },
    });
    expect(badKind).toMatchObject({
      status: 400,
      body: {
        status: "failed",
        error:
          "tools.t.value.node_type: 'shell' is not one of knowledge_base, transformation, pipeline, agent, ask_user",
      },
    });
    const noTarget = await v1(org.owner.apiKey, "POST", "/v1/agent", {
      name: "k",
      tools: { t: { name: "t", value: { node_type: "knowledge_base", inputs: {} } } },
    });
    expect(noTarget).toMatchObject({
      status: 400,
      body: { error: "tools.t: name the knowledge base in value.inputs.knowledge_base.value" },
    });
    const unknownKb = await v1(org.owner.apiKey, "POST", "/v1/agent", {
      name: "k",
      tools: { t: tool("knowledge_base", "0123456789abcdef01234567") },
    });
    expect(unknownKb).toMatchObject({
      status: 400,
      body: { error: "tools.t: knowledge base 0123456789abcdef01234567 does not exist or you cannot use it" },
    });
    const agentId = await createAgent(org.owner.apiKey);
    const badInput = await run(org.owner.apiKey, agentId, { inputs: { nope: "x" } });
    expect(badInput).toMatchObject({
      status: 400,
      body: { error: "inputs.nope: the agent has no input of that name; its inputs are question" },
    });
    const notPaused = await run(org.owner.apiKey, agentId, { inputs: { question: "x" } });
    const resume = await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/resume`, {
      run_id: notPaused.body.run_id,
      approve: ["c"],
    });
    expect(resume).toMatchObject({
      status: 409,
      body: { status: "failed", error: `run ${String(notPaused.body.run_id)} is completed, not paused` },
    });
  });
});

describe("agent runs: nesting and ending", () => {
  it("agents calling agents in a cycle stop at the depth bound, and the bound's error reaches the model", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const net = scriptedOpenAi((request) => {
      const result = ((request.json?.messages ?? []) as Body[]).find((m) => m.role === "tool");
      return result
        ? { text: `got: ${String(result.content)}` }
        : { calls: [{ name: "next", arguments: { input: "go on" } }] };
    });
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const a = await createAgent(org.owner.apiKey, { name: "cycle-a", llm_client_key: openAiKey });
    const b = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { n: tool("agent", a, { name: "next" }) },
    });
    expect(
      (
        await v1(org.owner.apiKey, "POST", `/v1/update/agent/${a}`, {
          name: "cycle-a",
          llm_client_key: openAiKey,
          inputs: { i: { name: "question" } },
          tools: { n: tool("agent", b, { name: "next" }) },
        })
      ).status,
    ).toBe(200);
    const { body } = await run(org.owner.apiKey, a, { inputs: { question: "loop" } });
    expect(body.status).toBe("success");
    expect(String((body.outputs as Body).output ?? (body.outputs as Body).answer)).toContain(
      "agents may call other agents at most 3 deep",
    );
    // Four runs: a (depth 0), b (1), a (2), b (3); the fifth was refused.
    const runsOfA = (await v1(org.owner.apiKey, "GET", `/v1/agent/${a}/runs`)).body.runs as Body[];
    const runsOfB = (await v1(org.owner.apiKey, "GET", `/v1/agent/${b}/runs`)).body.runs as Body[];
    expect([runsOfA.length, runsOfB.length]).toEqual([2, 2]);
  });

  it("terminate ends a paused run; a second terminate is a 409", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const net = scriptedOpenAi([{ calls: [{ name: "ask", arguments: { question: "?" } }] }]);
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { q: tool("ask_user", null, { name: "ask" }) },
    });
    const paused = await run(org.owner.apiKey, agentId, { inputs: { question: "x" } });
    expect(paused.body.state).toBe("paused");
    expect(
      (await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/terminate`, { run_id: paused.body.run_id })).status,
    ).toBe(200);
    const again = await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/terminate`, { run_id: paused.body.run_id });
    expect(again).toMatchObject({
      status: 409,
      body: { error: `run ${String(paused.body.run_id)} already ended (terminated)` },
    });
    const status = await v1(org.owner.apiKey, "GET", `/v1/agent/${agentId}/run/status/${String(paused.body.run_id)}`);
    expect(status.body.run).toMatchObject({ status: "terminated", error: "terminated by request" });
  });

  it("deleting an agent terminates its paused runs", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const net = scriptedOpenAi([{ calls: [{ name: "ask", arguments: { question: "?" } }] }]);
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { q: tool("ask_user", null, { name: "ask" }) },
    });
    const paused = await run(org.owner.apiKey, agentId, { inputs: { question: "x" } });
    expect((await v1(org.owner.apiKey, "DELETE", `/v1/agent/${agentId}`)).status).toBe(200);
    expect(await runStub(env, String(paused.body.run_id)).status()).toMatchObject({ status: "terminated" });
  });
});
