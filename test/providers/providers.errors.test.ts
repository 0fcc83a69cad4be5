import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { AppError } from "../../src/lib/errors";
import { chatModelFor, embedderFor, rerankerFor, transcriberFor } from "../../src/providers/registry";
import { ExtractiveAnswerer } from "../../src/providers/extractive";
import { connect, instant } from "./connect";
import {
  FakeAi,
  FakeNetwork,
  anthropicStream,
  captureConsole,
  chunked,
  collect,
  openAiCompletion,
  sse,
} from "./fake-providers";

async function failure(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe("providers: failures become the documented 502", () => {
  it("retries 429 and 5xx with backoff, then succeeds", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-retry-0001" });
    const answers = [
      new Response("slow down", { status: 429, headers: { "retry-after": "0" } }),
      new Response("oops", { status: 503 }),
    ];
    const net = new FakeNetwork().on(
      "https://api.openai.com/v1/chat/completions",
      () => answers.shift() ?? openAiCompletion("ok"),
    );
    const waits: number[] = [];
    const model = await chatModelFor(env, org, "openai/gpt-4o-mini", {
      fetch: net.fetch,
      retryBaseMs: 100,
      sleep: async (ms) => void waits.push(ms),
    });
    expect((await model.complete({ messages: [{ role: "user", content: "hi" }] })).text).toBe("ok");
    expect(net.received).toHaveLength(3);
    // Retry-After: 0 is honoured; the second wait is the exponential backoff (between 100 and 200 ms).
    expect(waits[0]).toBe(0);
    expect(waits[1]).toBeGreaterThanOrEqual(100);
    expect(waits[1]).toBeLessThanOrEqual(200);
  });

  it("gives up after a bounded number of attempts with a 502 naming the provider and connection", async () => {
    const org = await seedOrg();
    await connect(org, { name: "prod-openai", kind: "openai", secret: "sk-down-0002" });
    const net = new FakeNetwork().on("https://api.openai.com/v1/", () =>
      Response.json({ error: { message: "The server had an error" } }, { status: 500 }),
    );
    const model = await chatModelFor(env, org, "prod-openai/gpt-4o", { fetch: net.fetch, ...instant });
    const { error } = await captureConsole(() => model.complete({ messages: [{ role: "user", content: "hi" }] }));
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).status).toBe(502);
    expect((error as AppError).code).toBe("provider_failed");
    expect((error as AppError).message).toBe("the model provider openai (connection 'prod-openai') failed: HTTP 500");
    expect(net.received).toHaveLength(3);
  });

  it("retries network failures, and stops at once when the caller aborts", async () => {
    const org = await seedOrg();
    await connect(org, { name: "flaky", kind: "openai", base_url: "http://flaky.internal/v1", chat_model: "m" });
    let failures = 1;
    const net = new FakeNetwork().on("http://flaky.internal/v1/", () => openAiCompletion("recovered"));
    const flaky: typeof net.fetch = (input, init) =>
      failures-- > 0 ? Promise.reject(new TypeError("connection reset")) : net.fetch(input, init);
    const model = await chatModelFor(env, org, "flaky", { fetch: flaky, ...instant });
    expect((await model.complete({ messages: [{ role: "user", content: "x" }] })).text).toBe("recovered");

    const down: typeof net.fetch = () => Promise.reject(new TypeError("connection refused"));
    const dead = await chatModelFor(env, org, "flaky", { fetch: down, ...instant });
    const { error } = await captureConsole(() => dead.complete({ messages: [{ role: "user", content: "x" }] }));
    expect((error as AppError).message).toBe(
      "the model provider openai (connection 'flaky') failed: network error: connection refused",
    );

    const controller = new AbortController();
    controller.abort();
    let calls = 0;
    const counting: typeof net.fetch = (input, init) => {
      calls++;
      return init.signal?.aborted ? Promise.reject(new DOMException("aborted", "AbortError")) : net.fetch(input, init);
    };
    const aborted = await chatModelFor(env, org, "flaky", { fetch: counting, ...instant });
    expect(
      (await failure(aborted.complete({ messages: [{ role: "user", content: "x" }], signal: controller.signal })))
        .message,
    ).toBe("the model provider openai (connection 'flaky') failed: the request was aborted");
    expect(calls).toBe(1);
  });

  it("does not retry a 400 or 401: they will not get better", async () => {
    const org = await seedOrg();
    await connect(org, { name: "claude", kind: "anthropic", secret: "sk-ant-bad", chat_model: "claude-x" });
    const net = new FakeNetwork().on("https://api.anthropic.com/", () =>
      Response.json(
        { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } },
        { status: 401 },
      ),
    );
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch, ...instant });
    const error = (await captureConsole(() => model.complete({ messages: [{ role: "user", content: "hi" }] })))
      .error as AppError;
    expect(error.status).toBe(502);
    expect(error.message).toBe(
      "the model provider anthropic (connection 'claude') failed: HTTP 401 (the provider refused the credentials)",
    );
    expect(net.received).toHaveLength(1);
  });

  it("times out a provider that never answers", async () => {
    const org = await seedOrg();
    await connect(org, { name: "slow", kind: "cohere", base_url: "http://slow.internal", rerank_model: "r" });
    const net = new FakeNetwork().on("http://slow.internal/", (r) => new Promise<Response>(() => void r));
    const hanging: typeof net.fetch = (input, init) =>
      new Promise((resolve, reject) => {
        init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
        void net.fetch(input, init).then(resolve, reject);
      });
    const reranker = await rerankerFor(env, org, "slow", { fetch: hanging, timeoutMs: 30, maxRetries: 1, ...instant });
    const error = (await captureConsole(() => reranker.rerank("q", ["a"]))).error as AppError;
    expect(error.status).toBe(502);
    expect(error.message).toBe("the model provider cohere (connection 'slow') failed: no answer within 30 ms");
    expect(net.received).toHaveLength(2);
  });

  it("turns an Anthropic stream error event, a broken stream chunk and an empty answer into 502s", async () => {
    const org = await seedOrg();
    await connect(org, { name: "claude", kind: "anthropic", secret: "sk-ant-3", chat_model: "c" });
    await connect(org, {
      name: "local",
      kind: "openai",
      base_url: "http://llm.internal/v1",
      chat_model: "m",
      embedding_model: "e",
    });
    const net = new FakeNetwork()
      .on("https://api.anthropic.com/", () =>
        chunked([
          sse([
            { event: "error", data: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } },
          ]),
        ]),
      )
      .on("http://llm.internal/v1/chat/completions", () => chunked(["data: {not json\n\n"]))
      .on("http://llm.internal/v1/embeddings", () => Response.json({ data: [] }));
    const claude = await chatModelFor(env, org, "claude", { fetch: net.fetch, ...instant });
    expect((await failure(collect(claude.stream({ messages: [{ role: "user", content: "x" }] })))).message).toBe(
      "the model provider anthropic (connection 'claude') failed: the stream reported overloaded_error",
    );
    const local = await chatModelFor(env, org, "local", { fetch: net.fetch });
    expect((await failure(collect(local.stream({ messages: [{ role: "user", content: "x" }] })))).message).toBe(
      "the model provider openai (connection 'local') failed: the stream held a chunk that was not JSON",
    );
    const embedder = await embedderFor(env, org, "local", { fetch: net.fetch });
    expect((await failure(embedder.embed(["a"]))).message).toBe(
      "the model provider openai (connection 'local') failed: expected 1 embeddings, got 0",
    );
  });

  it("reports a Workers AI binding failure that is not transient at once", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cf", kind: "workers_ai" });
    const ai = new FakeAi();
    ai.failures.push(new Error("5007: No such model"));
    const chat = await chatModelFor(env, org, "cf/@cf/nope", { ai, ...instant });
    const error = (await captureConsole(() => chat.complete({ messages: [{ role: "user", content: "x" }] })))
      .error as AppError;
    expect(error.status).toBe(502);
    expect(error.message).toBe("the model provider workers_ai (connection 'cf') failed: 5007: No such model");
    expect(ai.calls).toHaveLength(1);
  });

  it("a stream cut off before its end marker is a 502, not a short answer", async () => {
    const org = await seedOrg();
    await connect(org, { name: "claude", kind: "anthropic", secret: "sk-ant-4", chat_model: "c" });
    await connect(org, { name: "local", kind: "openai", base_url: "http://llm.internal/v1", chat_model: "m" });
    const cut = (response: Response): Promise<Response> =>
      response.text().then((body) => chunked([body.slice(0, body.indexOf("rtial") + 10)]));
    const net = new FakeNetwork()
      .on("https://api.anthropic.com/", () => cut(anthropicStream(["partial"])))
      .on("http://llm.internal/v1/", () =>
        chunked([sse([{ data: { choices: [{ index: 0, delta: { content: "partial" } }] } }])]),
      );
    const claude = await chatModelFor(env, org, "claude", { fetch: net.fetch });
    expect((await failure(collect(claude.stream({ messages: [{ role: "user", content: "x" }] })))).message).toBe(
      "the model provider anthropic (connection 'claude') failed: the stream ended before message_stop",
    );
    const local = await chatModelFor(env, org, "local", { fetch: net.fetch });
    expect((await failure(collect(local.stream({ messages: [{ role: "user", content: "x" }] })))).message).toBe(
      "the model provider openai (connection 'local') failed: the stream ended before it finished",
    );
  });
});

describe("providers: a missing or wrong connection is a 400 that says what to add", () => {
  it("names the connection kinds to add for each capability", async () => {
    const org = await seedOrg();
    const chat = await failure(chatModelFor(env, org, undefined, { purpose: "transform_query" }));
    expect(chat.status).toBe(400);
    expect(chat.message).toBe(
      "transform_query needs a chat model: add a connection of kind openai, anthropic or workers_ai (POST /admin/connections/create) or name a model as <connection>/<model>",
    );
    expect((await failure(rerankerFor(env, org))).message).toContain(
      "rerank_documents needs a rerank model: add a connection of kind cohere or workers_ai",
    );
    expect((await failure(transcriberFor(env, org))).message).toContain(
      "needs a transcription model: add a connection of kind openai or workers_ai",
    );
    expect((await failure(embedderFor(env, org))).message).toContain(
      "needs an embedding model: add a connection of kind openai or workers_ai",
    );
  });

  it("falls back to the extractive answerer only where allowed, and says so in its name", async () => {
    const org = await seedOrg();
    const model = await chatModelFor(env, org, undefined, { allowExtractive: true });
    expect(model).toBeInstanceOf(ExtractiveAnswerer);
    expect(model.model).toBe("loom/extractive");
  });

  it("rejects unknown connections, connections of the wrong kind and models a connection cannot default", async () => {
    const org = await seedOrg();
    await connect(org, { name: "phone", kind: "telephony", secret: "tw-secret" });
    await connect(org, { name: "local", kind: "openai", base_url: "http://llm.internal/v1" });
    expect((await failure(chatModelFor(env, org, "nope/gpt-4o"))).message).toBe(
      "model 'nope/gpt-4o': this organization has no connection named 'nope'",
    );
    expect((await failure(chatModelFor(env, org, "phone/x"))).message).toBe(
      "model 'phone/x': connection 'phone' is of kind telephony, which does not serve chat models",
    );
    expect((await failure(chatModelFor(env, org, "local"))).message).toBe(
      "model 'local': connection 'local' has no default chat model; name one as local/<model>",
    );
    expect((await failure(chatModelFor(env, org, " "))).message).toBe("invalid model name: ''");
  });

  it("a workers_ai connection without a binding or account answers 400", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cf", kind: "workers_ai" });
    const error = await failure(chatModelFor(env, org, "cf"));
    expect(error.status).toBe(400);
    expect(error.message).toContain("this deployment has no AI binding");
  });
});
