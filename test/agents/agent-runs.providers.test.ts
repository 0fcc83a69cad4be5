import { afterEach, describe, expect, it } from "vitest";
import { call, bearer, json, seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { connect } from "../providers/connect";
import { anthropicMessage, anthropicStream, FakeNetwork } from "../providers/fake-providers";
import { createAgent, run, tool, useAgentDeps, type Body } from "./agent-run-fixtures";

const ANTHROPIC = "https://api.anthropic.com/v1/messages";

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

/** Anthropic's Messages API: tool_use blocks out, tool_result blocks back in a user turn. */
function scriptedAnthropic(): FakeNetwork {
  let n = 0;
  return new FakeNetwork().on(ANTHROPIC, (request) => {
    n += 1;
    const streamed = request.json?.stream === true;
    if (n === 1)
      return streamed
        ? anthropicStream(["Let me look."], { id: "toolu_1", name: "kb", jsonPieces: ['{"que', 'ry": "wind"}'] })
        : anthropicMessage("Let me look.", { id: "toolu_1", name: "kb", input: { query: "wind" } });
    return streamed
      ? anthropicStream(["Crosswind ", "limit is 20 knots."])
      : anthropicMessage("Crosswind limit is 20 knots.");
  });
}

describe("agent runs: Anthropic tool calling", () => {
  it("presents tools as input_schema, reads tool_use, answers with tool_result in a user turn, streamed or not", async () => {
    const org = await seedOrg();
    await connect(org, { name: "claude", kind: "anthropic", secret: "sk-ant-agent-4242" });
    const kb = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kb, "limits.txt", "The crosswind limit is 20 knots.");
    const agentId = await createAgent(org.owner.apiKey, {
      llm_client_key: { provider: "anthropic", model_id: "claude-sonnet-4-5" },
      tools: { a: tool("knowledge_base", kb, { name: "kb" }) },
    });

    const net = scriptedAnthropic();
    restore = useAgentDeps(() => ({ providers: { fetch: net.fetch } }));
    const { body } = await run(org.owner.apiKey, agentId, { inputs: { question: "crosswind limit?" } });
    expect(body).toMatchObject({ status: "success", outputs: { answer: "Crosswind limit is 20 knots." } });
    const [first, second] = net.received;
    expect(first.json).toMatchObject({
      model: "claude-sonnet-4-5",
      tools: [{ name: "kb", input_schema: { type: "object", required: ["query"] } }],
    });
    expect(typeof first.json?.system).toBe("string");
    const messages = second.json?.messages as { role: string; content: Body[] }[];
    expect(messages[1]).toMatchObject({
      role: "assistant",
      content: [
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "toolu_1", name: "kb", input: { query: "wind" } },
      ],
    });
    expect(messages[2].role).toBe("user");
    expect(messages[2].content[0]).toMatchObject({ type: "tool_result", tool_use_id: "toolu_1" });
    expect(String(messages[2].content[0].content)).toContain("20 knots");

    const streamNet = scriptedAnthropic();
    restore();
    restore = useAgentDeps(() => ({ providers: { fetch: streamNet.fetch } }));
    const streamed = await (
      await call(
        `/v1/agent/${agentId}/run`,
        json({ inputs: { question: "crosswind limit?" }, stream: true }, bearer(org.owner.apiKey)),
      )
    ).text();
    expect(streamed).toContain('"type":"tool_call","id":"toolu_1","name":"kb","arguments":{"query":"wind"}');
    expect(streamed).toContain('"type":"final"');
    expect(streamed).toContain("Crosswind limit is 20 knots.");
  });
});
