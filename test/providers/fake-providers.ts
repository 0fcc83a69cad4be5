/**
 * Fakes of the real model services, each speaking its real wire format, reached through the same
 * `fetch` seam production uses. Every request is recorded (url, headers, body) so tests can check
 * what was sent, and to whom.
 */
import type { FetchLike } from "../../src/providers/http";
import type { WorkersAiBinding } from "../../src/providers/workers-ai";

export interface Received {
  url: string;
  host: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  json?: Record<string, unknown>;
  form?: Record<string, string | { name: string; type: string; size: number }>;
}

type Handler = (request: Received) => Response | Promise<Response>;

/** A body that arrives in the given pieces, split wherever the test likes (mid-line, mid-JSON). */
export function chunked(pieces: string[], contentType = "text/event-stream"): Response {
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
  return new Response(stream, { headers: { "content-type": contentType } });
}

/** Splits a string into pieces of n characters, so SSE lines straddle chunk boundaries. */
export function slices(text: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += n) out.push(text.slice(i, i + n));
  return out;
}

export const sse = (events: { event?: string; data: unknown }[]): string =>
  events
    .map(
      (e) =>
        `${e.event ? `event: ${e.event}\n` : ""}data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`,
    )
    .join("");

export class FakeNetwork {
  readonly received: Received[] = [];
  private readonly handlers: { prefix: string; handler: Handler }[] = [];

  on(prefix: string, handler: Handler): this {
    this.handlers.unshift({ prefix, handler });
    return this;
  }

  readonly fetch: FetchLike = async (input, init) => {
    const url = new URL(input);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, key) => (headers[key] = value));
    const received: Received = { url: input, host: url.host, path: url.pathname, headers, body: "" };
    if (init.body instanceof FormData) {
      received.form = {};
      for (const [key, value] of init.body.entries()) {
        received.form[key] =
          typeof value === "string" ? value : { name: value.name, type: value.type, size: value.size };
      }
    } else if (typeof init.body === "string") {
      received.body = init.body;
      try {
        received.json = JSON.parse(init.body) as Record<string, unknown>;
      } catch {
        // not JSON
      }
    }
    this.received.push(received);
    const match = this.handlers.find((h) => input.startsWith(h.prefix));
    if (!match) throw new TypeError(`fake network: nothing listens at ${input}`);
    return match.handler(received);
  };

  to(host: string): Received[] {
    return this.received.filter((r) => r.host === host);
  }
}

// ---------- OpenAI-compatible ----------

export function openAiCompletion(
  text: string,
  usage = { prompt_tokens: 42, completion_tokens: 7 },
  toolCalls?: { id: string; name: string; arguments: string }[],
): Response {
  return Response.json({
    id: "chatcmpl-1",
    object: "chat.completion",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: toolCalls ? null : text,
          ...(toolCalls
            ? {
                tool_calls: toolCalls.map((c) => ({
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
        finish_reason: toolCalls ? "tool_calls" : "stop",
      },
    ],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  });
}

export function openAiStream(
  pieces: string[],
  options: {
    toolCall?: { id: string; name: string; argumentPieces: string[] };
    usage?: { prompt_tokens: number; completion_tokens: number };
    chunkSize?: number;
  } = {},
): Response {
  const events: { data: unknown }[] = [
    {
      data: {
        id: "c",
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { role: "assistant", content: "" } }],
      },
    },
  ];
  for (const piece of pieces)
    events.push({
      data: {
        id: "c",
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { content: piece }, finish_reason: null }],
      },
    });
  if (options.toolCall) {
    const call = options.toolCall;
    events.push({
      data: {
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [{ index: 0, id: call.id, type: "function", function: { name: call.name, arguments: "" } }],
            },
          },
        ],
      },
    });
    for (const piece of call.argumentPieces)
      events.push({
        data: { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] } }] },
      });
  }
  events.push({
    data: { choices: [{ index: 0, delta: {}, finish_reason: options.toolCall ? "tool_calls" : "stop" }] },
  });
  events.push({
    data: { choices: [], usage: options.usage ?? { prompt_tokens: 30, completion_tokens: pieces.length } },
  });
  events.push({ data: "[DONE]" });
  return chunked(slices(sse(events), options.chunkSize ?? 17));
}

export function openAiEmbeddings(request: Received, dimensions = 4): Response {
  const input = (request.json?.input ?? []) as string[];
  return Response.json({
    object: "list",
    // Out of order on purpose: clients must sort by index.
    data: input
      .map((text, index) => ({
        object: "embedding",
        index,
        embedding: Array.from({ length: dimensions }, (_, d) => (d === index % dimensions ? 3 : 0) + text.length / 100),
      }))
      .reverse(),
    model: request.json?.model,
    usage: { prompt_tokens: input.length * 5, total_tokens: input.length * 5 },
  });
}

// ---------- Anthropic Messages ----------

export function anthropicMessage(
  text: string,
  toolUse?: { id: string; name: string; input: Record<string, unknown> },
): Response {
  return Response.json({
    id: "msg_1",
    type: "message",
    role: "assistant",
    content: [{ type: "text", text }, ...(toolUse ? [{ type: "tool_use", ...toolUse }] : [])],
    stop_reason: toolUse ? "tool_use" : "end_turn",
    usage: { input_tokens: 55, output_tokens: 11 },
  });
}

export function anthropicStream(
  pieces: string[],
  toolUse?: { id: string; name: string; jsonPieces: string[] },
  chunkSize = 23,
): Response {
  const events: { event: string; data: unknown }[] = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          content: [],
          usage: { input_tokens: 61, output_tokens: 1 },
        },
      },
    },
    {
      event: "content_block_start",
      data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    },
    { event: "ping", data: { type: "ping" } },
    ...pieces.map((text) => ({
      event: "content_block_delta",
      data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } },
    })),
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
  ];
  if (toolUse) {
    events.push({
      event: "content_block_start",
      data: {
        type: "content_block_start",
        index: 1,
        content_block: { type: "tool_use", id: toolUse.id, name: toolUse.name, input: {} },
      },
    });
    for (const partial_json of toolUse.jsonPieces)
      events.push({
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json } },
      });
    events.push({ event: "content_block_stop", data: { type: "content_block_stop", index: 1 } });
  }
  events.push({
    event: "message_delta",
    data: {
      type: "message_delta",
      delta: { stop_reason: toolUse ? "tool_use" : "end_turn" },
      usage: { output_tokens: 15 },
    },
  });
  events.push({ event: "message_stop", data: { type: "message_stop" } });
  return chunked(slices(sse(events), chunkSize));
}

// ---------- Cohere rerank ----------

/** Scores each document by how many query words it contains, as a real cross-encoder would roughly. */
export function cohereRerank(request: Received): Response {
  const query = String(request.json?.query ?? "")
    .toLowerCase()
    .split(/\W+/)
    .filter(Boolean);
  const documents = (request.json?.documents ?? []) as string[];
  const topN = Number(request.json?.top_n ?? documents.length);
  const results = documents
    .map((doc, index) => ({
      index,
      relevance_score: query.filter((w) => doc.toLowerCase().includes(w)).length / Math.max(1, query.length),
    }))
    .sort((a, b) => b.relevance_score - a.relevance_score)
    .slice(0, topN);
  return Response.json({
    id: "rr-1",
    results,
    meta: { api_version: { version: "2" }, billed_units: { search_units: 1 } },
  });
}

// ---------- Workers AI binding ----------

export interface AiCall {
  model: string;
  inputs: Record<string, unknown>;
}

/** An object shaped like `env.AI`: records each run(model, inputs) and answers in the model's output shape. */
export class FakeAi implements WorkersAiBinding {
  readonly calls: AiCall[] = [];
  failures: Error[] = [];

  async run(model: string, inputs: Record<string, unknown>): Promise<unknown> {
    this.calls.push({ model, inputs });
    const failure = this.failures.shift();
    if (failure) throw failure;
    if (Array.isArray(inputs.messages)) {
      if (inputs.stream) {
        const encoder = new TextEncoder();
        const body = sse([
          { data: { response: "Lift " } },
          { data: { response: "rises [1]." } },
          { data: { response: "", usage: { prompt_tokens: 20, completion_tokens: 4 } } },
          { data: "[DONE]" },
        ]);
        return new ReadableStream<Uint8Array>({
          start(controller) {
            for (const piece of slices(body, 11)) controller.enqueue(encoder.encode(piece));
            controller.close();
          },
        });
      }
      if (Array.isArray(inputs.tools))
        return {
          response: null,
          tool_calls: [{ name: "lookup", arguments: { term: "wing" } }],
          usage: { prompt_tokens: 12, completion_tokens: 3 },
        };
      return { response: "Workers AI says hello", usage: { prompt_tokens: 12, completion_tokens: 4 } };
    }
    if (Array.isArray(inputs.text))
      return { shape: [inputs.text.length, 3], data: (inputs.text as string[]).map((_, i) => [i + 1, 0, 1]) };
    if ("audio" in inputs) return { text: "transcribed speech", word_count: 2 };
    if (Array.isArray(inputs.contexts)) {
      const contexts = inputs.contexts as { text: string }[];
      return {
        response: contexts
          .map((c, id) => ({ id, score: c.text.includes(String(inputs.query)) ? 0.9 : 0.1 }))
          .slice(0, Number(inputs.top_k ?? contexts.length)),
      };
    }
    throw new Error("fake AI: unknown input shape");
  }
}

/** Collects every console line written while `fn` runs, so tests can prove secrets never reach logs. */
export async function captureConsole<T>(
  fn: () => Promise<T>,
): Promise<{ value?: T; error?: unknown; lines: string[] }> {
  const lines: string[] = [];
  const methods = ["log", "info", "warn", "error", "debug"] as const;
  const originals = methods.map((m) => console[m]);
  for (const m of methods)
    console[m] = (...args: unknown[]) =>
      void lines.push(
        args
          .map((a) =>
            typeof a === "string"
              ? a
              : a instanceof Error
                ? `${a.name}: ${a.message} ${a.stack ?? ""}`
                : JSON.stringify(a),
          )
          .join(" "),
      );
  try {
    return { value: await fn(), lines };
  } catch (error) {
    return { error, lines };
  } finally {
    methods.forEach((m, i) => (console[m] = originals[i] as (typeof console)[typeof m]));
  }
}

export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}
