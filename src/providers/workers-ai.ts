import { providerFailed, joinUrl, send, sendJson, type ProviderTransport } from "./http";
import { readSse } from "./sse";
import type {
  ChatMessage,
  ChatModel,
  ChatRequest,
  ChatResult,
  ChatStreamEvent,
  Embedder,
  Reranker,
  RerankResult,
  ToolCall,
  Transcriber,
  TokenUsage,
} from "./types";
import { normalize, parseArguments } from "./usage";
import { logEvent } from "../lib/log";

/**
 * The part of the Workers AI binding (`env.AI`) Loom uses. The real binding satisfies it
 * structurally; tests pass an object that records calls and answers in the binding's shapes.
 */
export interface WorkersAiBinding {
  run(model: string, inputs: Record<string, unknown>, options?: Record<string, unknown>): Promise<unknown>;
}

/** Runs a Workers AI model: through the binding, or through the REST API with an account token. */
export interface AiRunner {
  run(model: string, inputs: Record<string, unknown>, signal?: AbortSignal): Promise<unknown>;
  readonly transport: ProviderTransport;
  readonly connection: string;
}

export const WORKERS_AI_DEFAULTS = {
  chat: "@cf/meta/llama-3.1-8b-instruct",
  embedding: "@cf/baai/bge-base-en-v1.5",
  rerank: "@cf/baai/bge-reranker-base",
  transcription: "@cf/openai/whisper",
} as const;

const KNOWN_DIMENSIONS: Record<string, number> = {
  "@cf/baai/bge-small-en-v1.5": 384,
  "@cf/baai/bge-base-en-v1.5": 768,
  "@cf/baai/bge-large-en-v1.5": 1024,
  "@cf/baai/bge-m3": 1024,
};

/** Errors the binding throws that are worth another try: capacity, rate limits, upstream hiccups. */
function transient(message: string): boolean {
  return /\b(3040|3043|429|5\d\d)\b|capacity|rate limit|timed? ?out|temporarily|unavailable/i.test(message);
}

export class BindingRunner implements AiRunner {
  constructor(
    private readonly binding: WorkersAiBinding,
    readonly transport: ProviderTransport,
    readonly connection: string,
  ) {}

  async run(model: string, inputs: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    const t = this.transport;
    const sleep = t.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    let reason = "no attempt made";
    for (let attempt = 0; attempt <= t.maxRetries; attempt++) {
      if (signal?.aborted) throw providerFailed(t, "the request was aborted");
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${t.timeoutMs} ms`)), t.timeoutMs);
        });
        return await Promise.race([this.binding.run(model, inputs), timeout]);
      } catch (error) {
        reason = error instanceof Error ? error.message : String(error);
        if (!transient(reason) || attempt === t.maxRetries) break;
        await sleep(Math.min(t.retryBaseMs * 2 ** attempt, 8_000));
      } finally {
        if (timer !== undefined) clearTimeout(timer);
      }
    }
    const failure = providerFailed(t, reason);
    logEvent("warn", "provider_failed", { provider: t.provider, connection: t.connection, message: failure.message });
    throw failure;
  }
}

/** The REST form of the same call, for a deployment without the binding: `settings.account_id` plus an API token. */
export class RestRunner implements AiRunner {
  constructor(
    readonly transport: ProviderTransport,
    readonly connection: string,
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  async run(model: string, inputs: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    const init: RequestInit = {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${this.token}` },
      body: JSON.stringify(inputs),
    };
    const url = joinUrl(this.baseUrl, `run/${model}`);
    if (inputs.stream === true) {
      const { response, deadline } = await send(this.transport, url, init, signal);
      if (!response.body) throw providerFailed(this.transport, "the stream had no body");
      return withDeadline(response.body, deadline);
    }
    const answer = await sendJson<{
      result?: unknown;
      success?: boolean;
      errors?: { code?: unknown; message?: string }[];
    }>(this.transport, url, init, signal);
    // Cloudflare's numeric error code says what failed; its message text is not passed on.
    const code = answer.errors?.[0]?.code;
    if (answer.success === false)
      throw providerFailed(
        this.transport,
        `the call did not succeed${typeof code === "number" ? ` (error ${code})` : ""}`,
      );
    return answer.result;
  }
}

/** Hands a stream on together with the deadline guarding it. */
function withDeadline(
  body: ReadableStream<Uint8Array>,
  deadline: import("./http").IdleDeadline,
): { body: ReadableStream<Uint8Array>; deadline: typeof deadline } {
  return { body, deadline };
}

type WireMessage = {
  role: string;
  content: string;
  tool_call_id?: string;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
};

function wireMessages(messages: ChatMessage[]): WireMessage[] {
  return messages.map((m) => {
    if (m.role === "tool") return { role: "tool", content: m.content, tool_call_id: m.toolCallId ?? "" };
    if (m.role === "assistant" && m.toolCalls?.length) {
      return {
        role: "assistant",
        content: m.content,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

interface TextGenerationOutput {
  response?: string | null;
  tool_calls?: { id?: string; name?: string; arguments?: unknown; function?: { name: string; arguments: string } }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number };
  // Newer models answer in the OpenAI shape.
  choices?: {
    message?: { content?: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
  }[];
}

function toolCallsOf(output: TextGenerationOutput): ToolCall[] {
  const calls: ToolCall[] = [];
  const raw = output.tool_calls ?? output.choices?.[0]?.message?.tool_calls ?? [];
  raw.forEach((call, i) => {
    const name = call.function?.name ?? ("name" in call ? (call.name ?? "") : "");
    const args = call.function?.arguments ?? ("arguments" in call ? call.arguments : undefined);
    calls.push({
      id: call.id ?? `call_${i}`,
      name,
      arguments:
        typeof args === "string" ? parseArguments(args) : ((args as Record<string, unknown> | undefined) ?? {}),
    });
  });
  return calls;
}

function usageOf(wire: { prompt_tokens?: number; completion_tokens?: number } | undefined): TokenUsage {
  return { input_tokens: wire?.prompt_tokens ?? 0, output_tokens: wire?.completion_tokens ?? 0 };
}

function isStream(value: unknown): value is ReadableStream<Uint8Array> {
  return value instanceof ReadableStream;
}

export class WorkersAiChatModel implements ChatModel {
  readonly model: string;

  constructor(
    private readonly runner: AiRunner,
    private readonly remoteModel: string,
  ) {
    this.model = `${runner.connection}/${remoteModel}`;
  }

  private inputs(request: ChatRequest, stream: boolean): Record<string, unknown> {
    return {
      messages: wireMessages(request.messages),
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.tools?.length
        ? {
            tools: request.tools.map((tool) => ({
              name: tool.name,
              description: tool.description,
              parameters: tool.parameters,
            })),
          }
        : {}),
      ...(stream ? { stream: true } : {}),
    };
  }

  async complete(request: ChatRequest): Promise<ChatResult> {
    const output = (await this.runner.run(
      this.remoteModel,
      this.inputs(request, false),
      request.signal,
    )) as TextGenerationOutput | null;
    if (!output || typeof output !== "object") throw providerFailed(this.runner.transport, "the answer was empty");
    const text = output.response ?? output.choices?.[0]?.message?.content ?? "";
    return {
      text: typeof text === "string" ? text : JSON.stringify(text),
      toolCalls: toolCallsOf(output),
      usage: usageOf(output.usage),
      model: this.model,
    };
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const t = this.runner.transport;
    const output = await this.runner.run(this.remoteModel, this.inputs(request, true), request.signal);
    const body = isStream(output) ? output : (output as { body?: unknown } | null)?.body;
    const deadline = isStream(output)
      ? undefined
      : (output as { deadline?: import("./http").IdleDeadline } | null)?.deadline;
    if (!isStream(body)) throw providerFailed(t, "the stream had no body");
    let text = "";
    let usage: TokenUsage = { input_tokens: 0, output_tokens: 0 };
    const toolCalls: ToolCall[] = [];
    for await (const event of readSse(body, deadline)) {
      if (event.data === "[DONE]") break;
      let chunk: TextGenerationOutput;
      try {
        chunk = JSON.parse(event.data) as TextGenerationOutput;
      } catch {
        throw providerFailed(t, "the stream held a chunk that was not JSON");
      }
      if (chunk.response) {
        text += chunk.response;
        yield { type: "text", text: chunk.response };
      }
      if (chunk.usage) usage = usageOf(chunk.usage);
      for (const call of toolCallsOf(chunk)) {
        toolCalls.push(call);
        yield { type: "tool_call", call };
      }
    }
    yield { type: "done", result: { text, toolCalls, usage, model: this.model } };
  }
}

/** Workers AI accepts up to 100 texts per embedding call. */
const EMBED_BATCH = 100;

export class WorkersAiEmbedder implements Embedder {
  readonly model: string;
  private learned: number;

  constructor(
    private readonly runner: AiRunner,
    private readonly remoteModel: string,
  ) {
    this.model = `${runner.connection}/${remoteModel}`;
    this.learned = KNOWN_DIMENSIONS[remoteModel] ?? 0;
  }

  get dimensions(): number {
    return this.learned;
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const vectors: Float32Array[] = [];
    for (let start = 0; start < texts.length; start += EMBED_BATCH) {
      const batch = texts.slice(start, start + EMBED_BATCH);
      const output = (await this.runner.run(this.remoteModel, { text: batch })) as { data?: number[][] } | null;
      if (!Array.isArray(output?.data) || output.data.length !== batch.length) {
        throw providerFailed(
          this.runner.transport,
          `expected ${batch.length} embeddings, got ${Array.isArray(output?.data) ? output.data.length : 0}`,
        );
      }
      for (const row of output.data) vectors.push(normalize(row));
    }
    if (vectors[0]) this.learned = vectors[0].length;
    return vectors;
  }
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) binary += String.fromCharCode(...bytes.subarray(i, i + step));
  return btoa(binary);
}

export class WorkersAiTranscriber implements Transcriber {
  readonly model: string;

  constructor(
    private readonly runner: AiRunner,
    private readonly remoteModel: string,
  ) {
    this.model = `${runner.connection}/${remoteModel}`;
  }

  async transcribe(audio: Uint8Array, _mimeType: string): Promise<{ text: string }> {
    // `@cf/openai/whisper` takes the bytes as an array of numbers; the large-v3-turbo model takes base64.
    const inputs = /large-v3|turbo/.test(this.remoteModel) ? { audio: base64(audio) } : { audio: [...audio] };
    const output = (await this.runner.run(this.remoteModel, inputs)) as { text?: string } | null;
    if (typeof output?.text !== "string") throw providerFailed(this.runner.transport, "the answer held no text");
    return { text: output.text };
  }
}

export class WorkersAiReranker implements Reranker {
  readonly model: string;

  constructor(
    private readonly runner: AiRunner,
    private readonly remoteModel: string,
  ) {
    this.model = `${runner.connection}/${remoteModel}`;
  }

  async rerank(query: string, documents: string[], topN?: number): Promise<RerankResult[]> {
    if (documents.length === 0) return [];
    const output = (await this.runner.run(this.remoteModel, {
      query,
      contexts: documents.map((text) => ({ text })),
      top_k: Math.min(topN ?? documents.length, documents.length),
    })) as {
      response?: { id?: number; score?: number }[];
    } | null;
    if (!Array.isArray(output?.response)) throw providerFailed(this.runner.transport, "the answer held no results");
    return output.response
      .filter((item) => Number.isInteger(item.id) && (item.id ?? -1) >= 0 && (item.id ?? 0) < documents.length)
      .map((item) => ({ index: item.id ?? 0, score: item.score ?? 0 }))
      .sort((a, b) => b.score - a.score);
  }
}
