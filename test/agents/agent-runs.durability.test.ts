import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthContext } from "../../src/env";
import type { AgentRunView } from "../../src/features/agents/agent-run-view";
import { runStub, startAgentRun } from "../../src/features/agents/agent-runs.service";
import { seedOrg } from "../helpers";
import { createKb } from "../knowledge-bases/kb-fixtures";
import { fakeServices } from "../pipelines/fixtures";
import {
  createAgent,
  openAiKey,
  scriptedOpenAi,
  tool,
  useAgentDeps,
  withOpenAi,
  type Body,
} from "./agent-run-fixtures";
import type { FakeNetwork } from "../providers/fake-providers";

/** Knowledge-base searches by query, and queries whose next search blocks until released (or forever). */
const searches: string[] = [];
const blocks = new Map<string, Promise<void>>();

const stubOf = (runId: string) => env.AGENT_RUNS.get(env.AGENT_RUNS.idFromName(runId));
const view = async (runId: string) => (await runStub(env, runId).status()) as AgentRunView;

/** Resets the run object as a crash would: in-memory state gone, storage kept. */
async function crash(runId: string): Promise<void> {
  await runInDurableObject(stubOf(runId), (_instance, state) => state.abort("simulated crash")).catch(() => undefined);
}

describe("agent runs: durability (alarms driven by hand)", () => {
  let restore: () => void;
  let net: FakeNetwork;
  let auth: AuthContext;
  let key: string;
  let kb: string;
  beforeAll(async () => {
    // Turn 1 asks for two searches in parallel; turn 2 answers with what it saw.
    net = scriptedOpenAi((request) => {
      const tools = ((request.json?.messages ?? []) as Body[]).filter((m) => m.role === "tool");
      if (tools.length === 0)
        return {
          calls: [
            { name: "kb", arguments: { query: "fast" }, id: "c_fast" },
            { name: "kb", arguments: { query: "slow" }, id: "c_slow" },
          ],
        };
      return { text: tools.map((t) => t.content).join(" | ") };
    });
    restore = useAgentDeps((e) => ({
      providers: { fetch: net.fetch },
      services: fakeServices(e, {
        async queryKnowledgeBase(_auth, _kb, query) {
          searches.push(query);
          const gate = blocks.get(query);
          if (gate) {
            blocks.delete(query);
            await gate;
          }
          return { text: `found ${query}`, results: [] };
        },
      }),
    }));
    const org = await seedOrg();
    await withOpenAi(org);
    key = org.owner.apiKey;
    kb = await createKb(key);
    auth = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
  });
  afterAll(() => restore());

  it("a crash between a tool call and its result: the saved result is kept, the model turn is not asked again, only the unfinished call runs again", async () => {
    const agentId = await createAgent(key, {
      llm_client_key: openAiKey,
      tools: { a: tool("knowledge_base", kb, { name: "kb" }) },
    });
    const init = await startAgentRun(env, auth, agentId, { inputs: { question: "go" }, additionalInstructions: null });
    await runStub(env, init.runId).start({ ...init, startDelayMs: 3_600_000 });
    searches.length = 0;
    const before = net.received.length;
    blocks.set("slow", new Promise<void>(() => undefined)); // the slow search never returns: the object dies while it is in flight
    const firstAlarm = runDurableObjectAlarm(stubOf(init.runId)).catch((e: unknown) => e);
    for (let i = 0; i < 1000 && !(searches.includes("slow") && (await view(init.runId)).steps.length >= 2); i++)
      await new Promise((r) => setTimeout(r, 10));
    const mid = await view(init.runId);
    expect(mid.steps).toEqual([
      {
        type: "model",
        text: "",
        tool_calls: [
          { id: "c_fast", name: "kb", arguments: { query: "fast" } },
          { id: "c_slow", name: "kb", arguments: { query: "slow" } },
        ],
      },
      { type: "tool_result", call_id: "c_fast", name: "kb", content: "found fast", is_error: false },
    ]);

    await crash(init.runId);
    expect(String(await firstAlarm)).toContain("simulated crash");

    // A fresh instance: the lease alarm continues after the last saved step.
    expect(await runDurableObjectAlarm(stubOf(init.runId))).toBe(true);
    const after = await view(init.runId);
    expect(after).toMatchObject({
      status: "completed",
      outputs: { answer: "found fast | found slow" },
      model_turns: 2,
    });
    expect(searches).toEqual(["fast", "slow", "slow"]);
    expect(net.received.length - before).toBe(2);
    // Results are in call order although the slow one arrived last.
    expect(after.steps.filter((s) => s.type === "tool_result").map((s) => (s as { call_id: string }).call_id)).toEqual([
      "c_fast",
      "c_slow",
    ]);
  });

  it("is safe when its alarm runs twice, and a finished run's alarm does nothing", async () => {
    const agentId = await createAgent(key, {
      llm_client_key: openAiKey,
      tools: { a: tool("knowledge_base", kb, { name: "kb" }) },
    });
    const init = await startAgentRun(env, auth, agentId, { inputs: { question: "go" }, additionalInstructions: null });
    await runStub(env, init.runId).start({ ...init, startDelayMs: 3_600_000 });
    searches.length = 0;
    await Promise.all([
      runDurableObjectAlarm(stubOf(init.runId)),
      runInDurableObject(stubOf(init.runId), (instance) => instance.alarm()),
    ]);
    const done = await view(init.runId);
    expect(done.status).toBe("completed");
    expect(searches).toEqual(["fast", "slow"]);
    expect(await runDurableObjectAlarm(stubOf(init.runId))).toBe(false);
    expect((await view(init.runId)).version).toBe(done.version);
  });
});
