import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { chatModelFor, embedderFor, rerankerFor, transcriberFor } from "../../src/providers/registry";
import { streamGroundedAnswer, groundedAnswer } from "../../src/providers/grounded-answer";
import type { ChatStreamEvent } from "../../src/providers/types";
import { connect, instant } from "./connect";
import {
  FakeAi,
  FakeNetwork,
  anthropicMessage,
  anthropicStream,
  cohereRerank,
  collect,
  openAiCompletion,
  openAiEmbeddings,
  openAiStream,
} from "./fake-providers";

const passages = [
  {
    text: "The wing was tested in a propeller slipstream. Lift increased with the slipstream velocity ratio.",
    documentId: "d1",
    title: "Slipstream study",
  },
  { text: "Heat conduction in composite slabs was solved analytically.", documentId: "d2" },
];

describe("providers: OpenAI-compatible", () => {
  it("completes a chat through the organization's connection and reports usage under <connection>/<model>", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-openai-test-1234" });
    const net = new FakeNetwork().on("https://api.openai.com/v1/chat/completions", () =>
      openAiCompletion("Lift increases [1]."),
    );
    const model = await chatModelFor(env, org, "openai/gpt-4o-mini", { fetch: net.fetch });
    const answer = await groundedAnswer({ model, question: "How does lift change in a slipstream?", passages });

    expect(answer).toMatchObject({
      text: "Lift increases [1].",
      model: "openai/gpt-4o-mini",
      extractive: false,
      usage: { input_tokens: 42, output_tokens: 7 },
    });
    expect(answer.citations).toEqual([{ source: 1, documentId: "d1", chunkId: undefined, title: "Slipstream study" }]);
    const sent = net.received[0];
    expect(sent?.json?.model).toBe("gpt-4o-mini");
    expect(sent?.headers.authorization).toBe("Bearer sk-openai-test-1234");
    // The prompt carries the retrieved context and the user's question.
    const messages = sent?.json?.messages as { role: string; content: string }[];
    expect(messages[0]?.role).toBe("system");
    expect(messages[0]?.content).toContain("[1] (Slipstream study) The wing was tested in a propeller slipstream.");
    expect(messages[0]?.content).toContain("[2] Heat conduction in composite slabs");
    expect(messages.at(-1)).toEqual({ role: "user", content: "How does lift change in a slipstream?" });
  });

  it("streams text pieces split across arbitrary chunk boundaries, then tool calls assembled from fragments", async () => {
    const org = await seedOrg();
    await connect(org, {
      name: "local",
      kind: "openai",
      base_url: "http://ollama.internal:11434/v1",
      chat_model: "llama3.2",
    });
    const net = new FakeNetwork().on("http://ollama.internal:11434/v1/chat/completions", () =>
      openAiStream(["Lift ", "rises ", "[1]."], {
        toolCall: { id: "call_1", name: "search", argumentPieces: ['{"que', 'ry": "wi', 'ng"}'] },
        usage: { prompt_tokens: 33, completion_tokens: 9 },
        chunkSize: 7,
      }),
    );
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    expect(model.model).toBe("local/llama3.2");
    const events = await collect(
      model.stream({
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "search", description: "search", parameters: { type: "object" } }],
      }),
    );
    expect(events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text)).toEqual([
      "Lift ",
      "rises ",
      "[1].",
    ]);
    expect(events.find((e) => e.type === "tool_call")).toEqual({
      type: "tool_call",
      call: { id: "call_1", name: "search", arguments: { query: "wing" } },
    });
    const done = events.at(-1) as Extract<ChatStreamEvent, { type: "done" }>;
    expect(done.result).toMatchObject({
      text: "Lift rises [1].",
      usage: { input_tokens: 33, output_tokens: 9 },
      model: "local/llama3.2",
    });
    const sent = net.received[0];
    expect(sent?.json).toMatchObject({
      model: "llama3.2",
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: "function", function: { name: "search" } }],
    });
    // A local server without a secret gets no Authorization header at all.
    expect(sent?.headers.authorization).toBeUndefined();
  });

  it("sends tool results back in OpenAI's shape and reads tool calls from a completion", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-x-123456" });
    const net = new FakeNetwork().on("https://api.openai.com/v1/chat/completions", () =>
      openAiCompletion("", undefined, [{ id: "c9", name: "lookup", arguments: '{"term":"mach"}' }]),
    );
    const model = await chatModelFor(env, org, "openai/gpt-4o", { fetch: net.fetch });
    const result = await model.complete({
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "lookup", arguments: { term: "lift" } }] },
        { role: "tool", content: "lift is a force", toolCallId: "c1" },
      ],
    });
    expect(result.toolCalls).toEqual([{ id: "c9", name: "lookup", arguments: { term: "mach" } }]);
    const messages = net.received[0]?.json?.messages as Record<string, unknown>[];
    expect(messages[1]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"term":"lift"}' } }],
    });
    expect(messages[2]).toEqual({ role: "tool", content: "lift is a force", tool_call_id: "c1" });
  });

  it("embeds in order as unit vectors and transcribes audio as multipart", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-emb-98765" });
    const net = new FakeNetwork()
      .on("https://api.openai.com/v1/embeddings", (r) => openAiEmbeddings(r, 4))
      .on("https://api.openai.com/v1/audio/transcriptions", () => Response.json({ text: "hello world" }));
    const embedder = await embedderFor(env, org, undefined, { fetch: net.fetch });
    expect(embedder.model).toBe("openai/text-embedding-3-small");
    expect(embedder.dimensions).toBe(1536);
    const custom = await embedderFor(env, org, "openai/my-embedder", { fetch: net.fetch });
    const vectors = await custom.embed(["a", "bb", "ccc"]);
    expect(custom.dimensions).toBe(4);
    expect(vectors).toHaveLength(3);
    for (const v of vectors) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    // Sorted back into input order although the fake answered in reverse.
    expect(vectors[0]?.[0]).toBeGreaterThan(vectors[0]?.[1] ?? 1);
    expect(vectors[1]?.[1]).toBeGreaterThan(vectors[1]?.[0] ?? 1);

    const transcriber = await transcriberFor(env, org, undefined, { fetch: net.fetch });
    expect(await transcriber.transcribe(new Uint8Array([1, 2, 3, 4]), "audio/mpeg")).toEqual({ text: "hello world" });
    const upload = net.received.at(-1);
    expect(upload?.form).toMatchObject({
      model: "whisper-1",
      response_format: "json",
      file: { name: "audio.mp3", type: "audio/mpeg", size: 4 },
    });
    expect(upload?.headers.authorization).toBe("Bearer sk-emb-98765");
  });
});

describe("providers: Anthropic Messages", () => {
  it("completes with system as a top-level field, x-api-key and anthropic-version headers, and tool use", async () => {
    const org = await seedOrg();
    await connect(org, {
      name: "claude",
      kind: "anthropic",
      secret: "sk-ant-secret-5555",
      chat_model: "claude-sonnet-4-5",
    });
    const net = new FakeNetwork().on("https://api.anthropic.com/v1/messages", () =>
      anthropicMessage("Per [1], lift rises.", { id: "toolu_1", name: "lookup", input: { term: "lift" } }),
    );
    const model = await chatModelFor(env, org, "claude", { fetch: net.fetch });
    const answer = await groundedAnswer({
      model,
      question: "What happens to lift?",
      passages,
      history: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
      ],
    });
    expect(answer).toMatchObject({
      text: "Per [1], lift rises.",
      model: "claude/claude-sonnet-4-5",
      usage: { input_tokens: 55, output_tokens: 11 },
    });
    const sent = net.received[0];
    expect(sent?.headers).toMatchObject({ "x-api-key": "sk-ant-secret-5555", "anthropic-version": "2023-06-01" });
    expect(sent?.headers.authorization).toBeUndefined();
    expect(sent?.json).toMatchObject({ model: "claude-sonnet-4-5", max_tokens: 1024 });
    expect(String(sent?.json?.system)).toContain("[1] (Slipstream study) The wing was tested");
    expect(sent?.json?.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Hi" }] },
      { role: "assistant", content: [{ type: "text", text: "Hello" }] },
      { role: "user", content: [{ type: "text", text: "What happens to lift?" }] },
    ]);
    const result = await model.complete({ messages: [{ role: "user", content: "x" }] });
    expect(result.toolCalls).toEqual([{ id: "toolu_1", name: "lookup", arguments: { term: "lift" } }]);
  });

  it("streams text deltas and tool input JSON fragments from its event stream", async () => {
    const org = await seedOrg();
    await connect(org, { name: "claude", kind: "anthropic", secret: "sk-ant-2", chat_model: "claude-haiku" });
    const net = new FakeNetwork().on("https://api.anthropic.com/v1/messages", () =>
      anthropicStream(
        ["Lift ", "rises", " [1]."],
        { id: "toolu_9", name: "search", jsonPieces: ['{"q":', '"wing"}'] },
        9,
      ),
    );
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    const events = await collect(
      model.stream({
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "q" },
          { role: "assistant", content: "", toolCalls: [{ id: "toolu_0", name: "search", arguments: { q: "x" } }] },
          { role: "tool", content: "found", toolCallId: "toolu_0" },
        ],
        tools: [{ name: "search", description: "d", parameters: { type: "object" } }],
      }),
    );
    expect(
      events
        .filter((e) => e.type === "text")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("Lift rises [1].");
    expect(events.find((e) => e.type === "tool_call")).toEqual({
      type: "tool_call",
      call: { id: "toolu_9", name: "search", arguments: { q: "wing" } },
    });
    const done = events.at(-1) as Extract<ChatStreamEvent, { type: "done" }>;
    expect(done.result.usage).toEqual({ input_tokens: 61, output_tokens: 15 });
    const sent = net.received[0]?.json;
    expect(sent).toMatchObject({
      stream: true,
      system: "be brief",
      tools: [{ name: "search", description: "d", input_schema: { type: "object" } }],
    });
    expect(sent?.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "q" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_0", name: "search", input: { q: "x" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_0", content: "found" }] },
    ]);
  });
});

describe("providers: Cohere-compatible rerank", () => {
  it("reranks through /v2/rerank by default and /v1/rerank when the base URL says so", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cohere", kind: "cohere", secret: "co-secret-7777" });
    await connect(org, {
      name: "tei",
      kind: "cohere",
      base_url: "http://tei.internal/v1",
      rerank_model: "bge-reranker",
    });
    const net = new FakeNetwork()
      .on("https://api.cohere.com/v2/rerank", cohereRerank)
      .on("http://tei.internal/v1/rerank", cohereRerank);
    const reranker = await rerankerFor(env, org, undefined, { fetch: net.fetch });
    expect(reranker.model).toBe("cohere/rerank-v3.5");
    const results = await reranker.rerank("slipstream lift", ["heat slabs", "lift in a slipstream", "lift only"], 2);
    expect(results).toEqual([
      { index: 1, score: 1 },
      { index: 2, score: 0.5 },
    ]);
    expect(net.received[0]?.json).toEqual({
      model: "rerank-v3.5",
      query: "slipstream lift",
      documents: ["heat slabs", "lift in a slipstream", "lift only"],
      top_n: 2,
    });
    expect(net.received[0]?.headers.authorization).toBe("Bearer co-secret-7777");

    const local = await rerankerFor(env, org, "tei", { fetch: net.fetch });
    await local.rerank("lift", ["a", "lift"]);
    expect(net.received[1]?.url).toBe("http://tei.internal/v1/rerank");
    expect(net.received[1]?.json?.model).toBe("bge-reranker");
  });

  it("uses a per-request api_key for that one call without any connection", async () => {
    const org = await seedOrg();
    const net = new FakeNetwork().on("https://api.cohere.com/v2/rerank", cohereRerank);
    const reranker = await rerankerFor(env, org, "rerank-english-v3.0", {
      apiKey: "request-key-abcdef",
      fetch: net.fetch,
    });
    await reranker.rerank("q", ["q doc"]);
    expect(net.received[0]?.headers.authorization).toBe("Bearer request-key-abcdef");
    expect(net.received[0]?.json?.model).toBe("rerank-english-v3.0");
  });
});

describe("providers: Workers AI binding", () => {
  it("calls env.AI.run with each task's input shape and reads its outputs", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cf", kind: "workers_ai" });
    const ai = new FakeAi();
    const chat = await chatModelFor(env, org, undefined, { ai });
    expect(chat.model).toBe("cf/@cf/meta/llama-3.1-8b-instruct");
    expect(await chat.complete({ messages: [{ role: "user", content: "hello" }], maxTokens: 50 })).toMatchObject({
      text: "Workers AI says hello",
      usage: { input_tokens: 12, output_tokens: 4 },
    });
    expect(ai.calls[0]).toEqual({
      model: "@cf/meta/llama-3.1-8b-instruct",
      inputs: { messages: [{ role: "user", content: "hello" }], max_tokens: 50 },
    });

    const withTools = await chat.complete({
      messages: [{ role: "user", content: "x" }],
      tools: [{ name: "lookup", description: "d", parameters: { type: "object" } }],
    });
    expect(withTools.toolCalls).toEqual([{ id: "call_0", name: "lookup", arguments: { term: "wing" } }]);
    expect(ai.calls[1]?.inputs.tools).toEqual([{ name: "lookup", description: "d", parameters: { type: "object" } }]);

    const streamed = await collect(streamGroundedAnswer({ model: chat, question: "lift?", passages }));
    expect(streamed.filter((e) => e.type === "text").map((e) => (e as { text: string }).text)).toEqual([
      "Lift ",
      "rises [1].",
    ]);
    expect(streamed.at(-1)).toMatchObject({
      type: "done",
      answer: {
        text: "Lift rises [1].",
        citations: [{ source: 1, documentId: "d1" }],
        usage: { input_tokens: 20, output_tokens: 4 },
      },
    });
    expect(ai.calls[2]?.inputs.stream).toBe(true);

    const embedder = await embedderFor(env, org, undefined, { ai });
    expect(embedder.dimensions).toBe(768);
    const vectors = await embedder.embed(["a", "b"]);
    expect(ai.calls[3]).toEqual({ model: "@cf/baai/bge-base-en-v1.5", inputs: { text: ["a", "b"] } });
    expect(Math.hypot(...(vectors[1] ?? []))).toBeCloseTo(1, 5);

    const transcriber = await transcriberFor(env, org, undefined, { ai });
    expect(await transcriber.transcribe(new Uint8Array([7, 8, 9]), "audio/wav")).toEqual({
      text: "transcribed speech",
    });
    expect(ai.calls[4]).toEqual({ model: "@cf/openai/whisper", inputs: { audio: [7, 8, 9] } });
    const turbo = await transcriberFor(env, org, "cf/@cf/openai/whisper-large-v3-turbo", { ai });
    await turbo.transcribe(new Uint8Array([1, 2, 3]), "audio/wav");
    expect(ai.calls[5]?.inputs).toEqual({ audio: "AQID" });

    const reranker = await rerankerFor(env, org, undefined, { ai });
    expect(await reranker.rerank("wing", ["heat", "wing tip"], 2)).toEqual([
      { index: 1, score: 0.9 },
      { index: 0, score: 0.1 },
    ]);
    expect(ai.calls[6]).toEqual({
      model: "@cf/baai/bge-reranker-base",
      inputs: { query: "wing", contexts: [{ text: "heat" }, { text: "wing tip" }], top_k: 2 },
    });
  });

  it("retries a capacity error from the binding and then answers", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cf", kind: "workers_ai" });
    const ai = new FakeAi();
    ai.failures.push(new Error("3040: Capacity temporarily exceeded"));
    const chat = await chatModelFor(env, org, "cf/@cf/meta/llama-3.3-70b-instruct-fp8-fast", { ai, ...instant });
    expect((await chat.complete({ messages: [{ role: "user", content: "hi" }] })).text).toBe("Workers AI says hello");
    expect(ai.calls).toHaveLength(2);
  });
});

describe("providers: Workers AI over REST", () => {
  it("uses the account's REST endpoint with the connection's token when settings.account_id is set", async () => {
    const org = await seedOrg();
    await connect(org, {
      name: "cfrest",
      kind: "workers_ai",
      secret: "cf-token-424242",
      settings: { account_id: "acc123" },
    });
    const net = new FakeNetwork().on("https://api.cloudflare.com/client/v4/accounts/acc123/ai/run/", () =>
      Response.json({ success: true, result: { response: "via REST" } }),
    );
    const chat = await chatModelFor(env, org, undefined, { fetch: net.fetch, ai: new FakeAi() });
    expect((await chat.complete({ messages: [{ role: "user", content: "hi" }] })).text).toBe("via REST");
    expect(net.received[0]?.url).toBe(
      "https://api.cloudflare.com/client/v4/accounts/acc123/ai/run/@cf/meta/llama-3.1-8b-instruct",
    );
    expect(net.received[0]?.headers.authorization).toBe("Bearer cf-token-424242");
    expect(net.received[0]?.json).toEqual({ messages: [{ role: "user", content: "hi" }] });
  });
});
