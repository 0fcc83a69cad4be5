import { afterEach, describe, expect, it } from "vitest";
import { call, seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { createPipeline, SMALLEST } from "../pipelines/fixtures";
import { createDoubleJs } from "../transformations/fixtures";
import { bearer } from "../helpers";
import {
  createAgent,
  messagesOf,
  openAiKey,
  run,
  scriptedOpenAi,
  tool,
  useAgentDeps,
  v1,
  withOpenAi,
  type Body,
} from "./agent-run-fixtures";

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

describe("agents run: offline", () => {
  it("the built-in loom/extractive answers by searching the agent's knowledge base, labelled, and the run is in the history and the run list", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    await indexText(
      org.owner.apiKey,
      kb,
      "refunds.txt",
      "Refunds are paid within 14 days of the request. Shipping is free above 50 euros.",
    );
    const agentId = await createAgent(org.owner.apiKey, {
      tools: { t1: tool("knowledge_base", kb, { name: "handbook" }) },
    });
    const { status, body } = await run(org.owner.apiKey, agentId, {
      inputs: { question: "how long do refunds take?" },
    });
    expect(status).toBe(200);
    expect(body.status).toBe("success");
    const answer = String((body.outputs as Body).answer);
    expect(answer).toContain("14 days");
    expect(answer).toContain("loom/extractive");
    const steps = body.steps as Body[];
    expect(steps[0]).toMatchObject({
      type: "model",
      tool_calls: [{ name: "handbook", arguments: { query: "how long do refunds take?" } }],
    });
    expect(steps[1]).toMatchObject({ type: "tool_result", name: "handbook", is_error: false });

    const history = (await (await call("/agents/history", { headers: bearer(org.owner.token) })).json()) as Body[];
    expect(history.find((h) => h.action === "run")).toMatchObject({ agentId, runId: body.run_id });
    const runs = await v1(org.owner.apiKey, "GET", `/v1/agent/${agentId}/runs`);
    expect((runs.body.runs as Body[])[0]).toMatchObject({ run_id: body.run_id, status: "completed" });
    const fetched = await v1(org.owner.apiKey, "GET", `/v1/agent/${agentId}/run/status/${String(body.run_id)}`);
    expect(fetched.body.run).toMatchObject({ status: "completed", model_turns: 2 });
  });

  it("the same agent is a Group B record: listed by /agents, with tools back as a list on GET /v1/agent", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    const agentId = await createAgent(org.owner.apiKey, {
      name: "both-groups",
      tools: { t1: tool("knowledge_base", kb, { requires_approval: true }) },
    });
    const listed = (await (await call("/agents", { headers: bearer(org.owner.token) })).json()) as { agents: Body[] };
    expect(listed.agents.map((a) => a._id)).toContain(agentId);
    const fetched = await v1(org.owner.apiKey, "GET", `/v1/agent?name=both-groups`);
    const object = fetched.body.object as Body;
    expect(object).toMatchObject({
      _id: agentId,
      mainBranch: agentId,
      llm_client_key: { provider: "loom", model_id: "extractive" },
    });
    expect(object.tools).toEqual([
      {
        id: "t1",
        name: "knowledge_base_tool",
        description: "",
        requires_approval: true,
        value: { node_type: "knowledge_base", inputs: { knowledge_base: { type: "string", value: kb } } },
      },
    ]);
    const updated = await v1(org.owner.apiKey, "POST", `/v1/update/agent/${agentId}`, {
      name: "both-groups",
      instructions: "be terse",
      tools: {},
    });
    expect(updated.body).toMatchObject({ status: "success", id: agentId, version: 2 });
    expect(((await v1(org.owner.apiKey, "GET", `/v1/agent?id=${agentId}`)).body.object as Body).instructions).toBe(
      "be terse",
    );
    expect((await v1(org.owner.apiKey, "DELETE", `/v1/agent/${agentId}`)).status).toBe(200);
    expect((await v1(org.owner.apiKey, "GET", `/v1/agent?id=${agentId}`)).status).toBe(404);
  });
});

describe("agents run: OpenAI-compatible tool calling", () => {
  it("each tool kind (knowledge base, transformation, pipeline, agent) runs; parallel calls of one turn come back in call order", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const kb = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kb, "a.txt", "The hangar opens at seven in the morning.");
    const transformation = await createDoubleJs(org.owner);
    const pipeline = await createPipeline(org.owner.apiKey, SMALLEST);
    const child = await createAgent(org.owner.apiKey, { tools: { k: tool("knowledge_base", kb, { name: "kb" }) } });
    const net = scriptedOpenAi([
      {
        calls: [
          { name: "kb", arguments: { query: "hangar opening" } },
          { name: "double", arguments: { x: 21 } },
          { name: "greeter", arguments: { q: "pilot" } },
          { name: "helper", arguments: { input: "when does the hangar open?" } },
        ],
      },
      { text: "All done." },
    ]);
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: {
        a: tool("knowledge_base", kb, { name: "kb" }),
        b: tool("transformation", transformation, { name: "double" }),
        c: tool("pipeline", pipeline, { name: "greeter" }),
        d: tool("agent", child, { name: "helper" }),
      },
    });
    const { status, body } = await run(org.owner.apiKey, agentId, { inputs: { question: "plan my day" } });
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: "success", outputs: { answer: "All done." } });
    const results = (body.steps as Body[]).filter((s) => s.type === "tool_result");
    expect(results.map((r) => r.name)).toEqual(["kb", "double", "greeter", "helper"]);
    expect(results.every((r) => r.is_error === false)).toBe(true);
    expect(String(results[0].content)).toContain("seven in the morning");
    expect(JSON.parse(String(results[1].content))).toEqual({ y: 42 });
    expect(JSON.parse(String(results[2].content))).toEqual({ answer: "Hello pilot" });
    expect(String(results[3].content)).toContain("seven in the morning");
    // The tools were presented with schemas generated from their records.
    const tools = net.to("api.openai.com")[0].json?.tools as { function: { name: string; parameters: Body } }[];
    expect(tools.find((t) => t.function.name === "double")?.function.parameters).toMatchObject({
      properties: { x: { type: "number" } },
    });
    expect(tools.find((t) => t.function.name === "greeter")?.function.parameters).toMatchObject({
      properties: { q: {} },
      required: ["q"],
    });
    // The second turn saw every result, in call order, answering its call.
    const second = messagesOf(net, 1).filter((m) => m.role === "tool");
    expect(second.map((m) => m.tool_call_id)).toEqual(["call_1_0", "call_1_1", "call_1_2", "call_1_3"]);
    expect(body.usage).toEqual({ input_tokens: 200, output_tokens: 20 });
  });

  it("streams tokens, tool calls with their arguments, tool results and the final answer as server-sent events", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const kb = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kb, "a.txt", "The runway closes at dusk.");
    const net = scriptedOpenAi([
      { calls: [{ name: "kb", arguments: { query: "runway" } }] },
      { text: "It closes at dusk." },
    ]);
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { a: tool("knowledge_base", kb, { name: "kb" }) },
    });
    const response = await call(`/v1/agent/${agentId}/run`, {
      method: "POST",
      headers: { ...bearer(org.owner.apiKey), "content-type": "application/json" },
      body: JSON.stringify({ inputs: { question: "runway?" }, stream: true }),
    });
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const text = await response.text();
    const events = text
      .split("\n\n")
      .filter(Boolean)
      .map(
        (block) =>
          JSON.parse(
            block
              .split("\n")
              .find((l) => l.startsWith("data: "))
              ?.slice(6) ?? "{}",
          ) as Body,
      );
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("tool_call");
    expect(events[0]).toMatchObject({ name: "kb", arguments: { query: "runway" } });
    expect(types[1]).toBe("tool_result");
    expect(String(events[1].content)).toContain("dusk");
    expect(
      events
        .filter((e) => e.type === "token")
        .map((e) => e.text)
        .join(""),
    ).toBe("It closes at dusk.");
    expect(events[events.length - 1]).toMatchObject({ type: "final", outputs: { answer: "It closes at dusk." } });
  });

  it("a tool that needs approval pauses the run with the pending call; approving runs it, refusing tells the model", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const kb = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kb, "a.txt", "Fuel costs two euros a litre.");
    const net = scriptedOpenAi((request) => {
      const messages = (request.json?.messages ?? []) as Body[];
      const tools = messages.filter((m) => m.role === "tool");
      if (tools.length === 0) return { calls: [{ name: "kb", arguments: { query: "fuel" } }] };
      return { text: `saw: ${String(tools[0].content).slice(0, 60)}` };
    });
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { a: tool("knowledge_base", kb, { name: "kb", requires_approval: true }) },
    });

    const first = await run(org.owner.apiKey, agentId, { inputs: { question: "fuel?" } });
    expect(first.body).toMatchObject({
      status: "success",
      state: "paused",
      pending: [{ name: "kb", arguments: { query: "fuel" }, waiting: "approval" }],
    });
    const callId = String((first.body.pending as Body[])[0].id);
    const approved = await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/resume`, {
      run_id: first.body.run_id,
      approve: [callId],
    });
    expect(approved.body).toMatchObject({ status: "success", state: "completed" });
    expect(String((approved.body.outputs as Body).answer)).toContain("two euros");

    const second = await run(org.owner.apiKey, agentId, { inputs: { question: "fuel?" } });
    const refused = await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/resume`, {
      run_id: second.body.run_id,
      refuse: [String((second.body.pending as Body[])[0].id)],
    });
    expect(refused.body).toMatchObject({ state: "completed" });
    expect(String((refused.body.outputs as Body).answer)).toContain("The user refused this tool call");
  });

  it("ask_user pauses with the question; the starter's answer goes back to the model", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const net = scriptedOpenAi((request) => {
      const tools = ((request.json?.messages ?? []) as Body[]).filter((m) => m.role === "tool");
      return tools.length === 0
        ? { calls: [{ name: "ask", arguments: { question: "Which airport?" } }] }
        : { text: `Booking at ${String(tools[0].content)}` };
    });
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      tools: { q: tool("ask_user", null, { name: "ask" }) },
    });
    const first = await run(org.owner.apiKey, agentId, { inputs: { question: "book a slot" } });
    expect(first.body).toMatchObject({
      state: "paused",
      pending: [{ waiting: "question", arguments: { question: "Which airport?" } }],
    });
    const id = String((first.body.pending as Body[])[0].id);
    const answered = await v1(org.owner.apiKey, "POST", `/v1/agent/${agentId}/resume`, {
      run_id: first.body.run_id,
      answers: { [id]: "LFPG" },
    });
    expect(answered.body).toMatchObject({ state: "completed", outputs: { answer: "Booking at LFPG" } });
  });
});

describe("agents run: the SDK's multipart form", () => {
  it("a file part named after an input fills it; the model is told the file's name", async () => {
    const org = await seedOrg();
    await withOpenAi(org);
    const net = scriptedOpenAi([{ text: "read it" }]);
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: openAiKey,
      inputs: { a: { name: "question", io_type: "string" }, b: { name: "doc", io_type: "file" } },
    });
    const form = new FormData();
    form.append("inputs", JSON.stringify({ question: "summarise" }));
    form.append("doc", new File(["hello"], "notes.txt"));
    const response = await call(`/v1/agent/${agentId}/run`, {
      method: "POST",
      headers: bearer(org.owner.apiKey),
      body: form,
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: "success", outputs: { answer: "read it" } });
    const user = messagesOf(net, 0).find((m) => m.role === "user");
    expect(user?.content).toBe("question: summarise\ndoc: (file notes.txt)");
  });
});
