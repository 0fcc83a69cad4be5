import { env } from "cloudflare:test";
import type { Env } from "../../src/env";
import type { AgentRunDeps } from "../../src/features/agents/agent-run-deps";
import { productionNodeServices } from "../../src/features/pipelines/pipeline-services";
import { bearer, call, json, type Org } from "../helpers";
import { FakeNetwork, type Received } from "../providers/fake-providers";
import { connect } from "../providers/connect";
import { useAgentRunDeps } from "../test-deps";

export type Body = Record<string, unknown>;

export const OPENAI = "https://api.openai.com/v1/chat/completions";
export const OPENAI_SECRET = "sk-agent-test-secret-7788";

export async function v1(
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Body }> {
  const response = await call(
    path,
    body === undefined ? { method, headers: bearer(key) } : { ...json(body, bearer(key)), method },
  );
  const text = await response.text();
  return { status: response.status, body: (text.startsWith("{") ? JSON.parse(text) : { raw: text }) as Body };
}

export const tool = (kind: string, target: string | null, extra: Body = {}): Body => ({
  name: `${kind}_tool`,
  description: "",
  value: { node_type: kind, inputs: target ? { [kind]: { type: "string", value: target } } : {} },
  ...extra,
});

export async function createAgent(key: string, fields: Body = {}): Promise<string> {
  const body = {
    name: `agent-${Math.random().toString(36).slice(2, 9)}`,
    instructions: "Answer from the tools.",
    llm_client_key: { provider: "loom", model_id: "extractive" },
    inputs: { input_1: { name: "question", io_type: "string" } },
    outputs: { output_1: { name: "answer", io_type: "string" } },
    ...fields,
  };
  const { status, body: answer } = await v1(key, "POST", "/v1/agent", body);
  if (status !== 200) throw new Error(`create agent: ${status} ${JSON.stringify(answer)}`);
  return String(answer.id);
}

export const run = (key: string, agentId: string, body: Body) => v1(key, "POST", `/v1/agent/${agentId}/run`, body);

/** Makes new run objects use these dependencies (production for the rest) until the returned function is called. */
export function useAgentDeps(make: (env: Env) => Partial<AgentRunDeps>): () => void {
  return useAgentRunDeps((e) => {
    const { services, providers } = make(e);
    return { nodeServices: () => services ?? productionNodeServices(e, {}), providers: providers ?? {} };
  });
}

export type Turn = { text: string } | { calls: { name: string; arguments: Body; id?: string }[] };

/** An OpenAI-compatible server whose answers follow a script: turn n answers the n-th request. */
export function scriptedOpenAi(turns: Turn[] | ((request: Received, index: number) => Turn)): FakeNetwork {
  let index = 0;
  const net = new FakeNetwork();
  net.on(OPENAI, (request) => {
    const turn = typeof turns === "function" ? turns(request, index) : (turns[index] ?? { text: "done" });
    index += 1;
    const usage = { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 };
    const toolCalls =
      "calls" in turn
        ? turn.calls.map((c, i) => ({
            id: c.id ?? `call_${index}_${i}`,
            type: "function",
            function: { name: c.name, arguments: JSON.stringify(c.arguments) },
          }))
        : undefined;
    const content = "text" in turn ? turn.text : null;
    if (request.json?.stream) {
      const chunks: unknown[] = [];
      if (content)
        for (const piece of content.match(/.{1,5}/gs) ?? [])
          chunks.push({ choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
      (toolCalls ?? []).forEach((c, i) =>
        chunks.push({
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [
                  {
                    index: i,
                    id: c.id,
                    type: "function",
                    function: { name: c.function.name, arguments: c.function.arguments },
                  },
                ],
              },
              finish_reason: null,
            },
          ],
        }),
      );
      chunks.push({ choices: [{ index: 0, delta: {}, finish_reason: toolCalls ? "tool_calls" : "stop" }], usage });
      const text = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
      return new Response(text, { headers: { "content-type": "text/event-stream" } });
    }
    return Response.json({
      id: "chatcmpl-agent",
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
          finish_reason: toolCalls ? "tool_calls" : "stop",
        },
      ],
      usage,
    });
  });
  return net;
}

export async function withOpenAi(org: Org): Promise<void> {
  await connect(org, { name: "openai", kind: "openai", secret: OPENAI_SECRET });
}

export const openAiKey = { provider: "openai", model_id: "gpt-4o-mini" };

/** The messages the model received in request n. */
export const messagesOf = (net: FakeNetwork, n: number) =>
  (net.to("api.openai.com")[n]?.json?.messages ?? []) as Body[];

export { env };
