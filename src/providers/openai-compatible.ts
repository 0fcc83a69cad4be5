import { joinUrl, providerFailed, send, sendJson, type ProviderTransport } from "./http";
import { readSse } from "./sse";
import type {
  ChatMessage,
  ChatModel,
  ChatRequest,
  ChatResult,
  ChatStreamEvent,
  Embedder,
  ToolCall,
  Transcriber,
  TokenUsage,
} from "./types";
import { normalize, parseArguments } from "./usage";

/**
 * OpenAI's chat completions, embeddings and audio transcriptions wire format. The base URL makes the
 * same client serve Ollama (`http://localhost:11434/v1`), vLLM, llama.cpp's server and other
 * compatible endpoints; a connection without a secret sends no Authorization header.
 */
export interface OpenAiEndpoint {
  transport: ProviderTransport;
  baseUrl: string;
  secret: string | null;
  /** The connection's name: models are reported as `<connection>/<model>`. */
  connection: string;
}

interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

interface WireMessage {
  role: ChatMessage["role"];
  content: string | null;
  tool_call_id?: string;
  tool_calls?: WireToolCall[];
}

interface CompletionResponse {
  choices?: { message?: { content?: string | null; tool_calls?: WireToolCall[] } }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

interface CompletionChunk {
  choices?: {
    delta?: {
      content?: string | null;
      tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

function headers(endpoint: OpenAiEndpoint, json = true): Record<string, string> {
  const result: Record<string, string> = {};
  if (json) result["content-type"] = "application/json";
  if (endpoint.secret) result.authorization = `Bearer ${endpoint.secret}`;
  return result;
}

function wireMessages(messages: ChatMessage[]): WireMessage[] {
  return messages.map((message) => {
    if (message.role === "tool")
      return { role: "tool", content: message.content, tool_call_id: message.toolCallId ?? "" };
    if (message.role === "assistant" && message.toolCalls?.length) {
      return {
        role: "assistant",
        content: message.content || null,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: "function",
          function: { name: call.name, arguments: JSON.stringify(call.arguments) },
        })),
      };
    }
    return { role: message.role, content: message.content };
  });
}

function usageOf(wire: { prompt_tokens?: number; completion_tokens?: number } | null | undefined): TokenUsage {
  return { input_tokens: wire?.prompt_tokens ?? 0, output_tokens: wire?.completion_tokens ?? 0 };
}

export class OpenAiChatModel implements ChatModel {
  readonly model: string;

  constructor(
    private readonly endpoint: OpenAiEndpoint,
    private readonly remoteModel: string,
  ) {
    this.model = `${endpoint.connection}/${remoteModel}`;
  }

  private body(request: ChatRequest, stream: boolean): string {
    return JSON.stringify({
      model: this.remoteModel,
      messages: wireMessages(request.messages),
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.tools?.length
        ? {
            tools: request.tools.map((tool) => ({
              type: "function",
              function: { name: tool.name, description: tool.description, parameters: tool.parameters },
            })),
          }
        : {}),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    });
  }

  async complete(request: ChatRequest): Promise<ChatResult> {
    const t = this.endpoint.transport;
    const answer = await sendJson<CompletionResponse>(
      t,
      joinUrl(this.endpoint.baseUrl, "chat/completions"),
      { method: "POST", headers: headers(this.endpoint), body: this.body(request, false) },
      request.signal,
    );
    const message = answer.choices?.[0]?.message;
    if (!message) throw providerFailed(t, "the answer held no choices");
    return {
      text: message.content ?? "",
      toolCalls: (message.tool_calls ?? []).map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments: parseArguments(call.function.arguments),
      })),
      usage: usageOf(answer.usage),
      model: this.model,
    };
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const t = this.endpoint.transport;
    const { response, deadline } = await send(
      t,
      joinUrl(this.endpoint.baseUrl, "chat/completions"),
      {
        method: "POST",
        headers: { ...headers(this.endpoint), accept: "text/event-stream" },
        body: this.body(request, true),
      },
      request.signal,
    );
    if (!response.body) throw providerFailed(t, "the stream had no body");
    let text = "";
    let usage: TokenUsage = { input_tokens: 0, output_tokens: 0 };
    // Tool calls arrive as fragments keyed by index: the id and name first, the arguments in pieces.
    const partial = new Map<number, { id: string; name: string; args: string }>();
    let finished = false;
    for await (const event of readSse(response.body, deadline)) {
      if (event.data === "[DONE]") {
        finished = true;
        break;
      }
      let chunk: CompletionChunk;
      try {
        chunk = JSON.parse(event.data) as CompletionChunk;
      } catch {
        throw providerFailed(t, "the stream held a chunk that was not JSON");
      }
      if (chunk.usage) usage = usageOf(chunk.usage);
      for (const choice of chunk.choices ?? []) {
        if (choice.finish_reason) finished = true;
        const piece = choice.delta?.content;
        if (piece) {
          text += piece;
          yield { type: "text", text: piece };
        }
        for (const fragment of choice.delta?.tool_calls ?? []) {
          const entry = partial.get(fragment.index) ?? { id: "", name: "", args: "" };
          if (fragment.id) entry.id = fragment.id;
          if (fragment.function?.name) entry.name += fragment.function.name;
          if (fragment.function?.arguments) entry.args += fragment.function.arguments;
          partial.set(fragment.index, entry);
        }
      }
    }
    // Servers end with [DONE] or at least a finish_reason; a stream with neither was cut off.
    if (!finished) throw providerFailed(t, "the stream ended before it finished");
    const toolCalls: ToolCall[] = [...partial.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({ id: call.id, name: call.name, arguments: parseArguments(call.args) }));
    for (const call of toolCalls) yield { type: "tool_call", call };
    yield { type: "done", result: { text, toolCalls, usage, model: this.model } };
  }
}

/** Known output sizes, so a knowledge base can record its dimensions before the first call. */
const KNOWN_DIMENSIONS: Record<string, number> = {
  "text-embedding-3-small": 1536,
  "text-embedding-3-large": 3072,
  "text-embedding-ada-002": 1536,
  "nomic-embed-text": 768,
  "mxbai-embed-large": 1024,
  "all-minilm": 384,
};

/** Inputs per request: OpenAI accepts 2048, local servers often far fewer. */
const EMBED_BATCH = 96;

export class OpenAiEmbedder implements Embedder {
  readonly model: string;
  private learned: number;
  /** Filled by each call, so callers can add it to `result.usage`. */
  lastUsage: TokenUsage = { input_tokens: 0, output_tokens: 0 };

  constructor(
    private readonly endpoint: OpenAiEndpoint,
    private readonly remoteModel: string,
    /** Set by the connection's `settings.embedding_dimensions`; asks text-embedding-3 models to shorten. */
    private readonly requestedDimensions?: number,
  ) {
    this.model = `${endpoint.connection}/${remoteModel}`;
    this.learned = requestedDimensions ?? KNOWN_DIMENSIONS[remoteModel] ?? 0;
  }

  /** 0 until the first call for a model of unknown size. */
  get dimensions(): number {
    return this.learned;
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const t = this.endpoint.transport;
    const vectors: Float32Array[] = [];
    let inputTokens = 0;
    for (let start = 0; start < texts.length; start += EMBED_BATCH) {
      const batch = texts.slice(start, start + EMBED_BATCH);
      const answer = await sendJson<{
        data?: { index: number; embedding: number[] }[];
        usage?: { prompt_tokens?: number };
      }>(t, joinUrl(this.endpoint.baseUrl, "embeddings"), {
        method: "POST",
        headers: headers(this.endpoint),
        body: JSON.stringify({
          model: this.remoteModel,
          input: batch,
          encoding_format: "float",
          ...(this.requestedDimensions ? { dimensions: this.requestedDimensions } : {}),
        }),
      });
      const data = [...(answer.data ?? [])].sort((a, b) => a.index - b.index);
      if (data.length !== batch.length)
        throw providerFailed(t, `expected ${batch.length} embeddings, got ${data.length}`);
      for (const item of data) vectors.push(normalize(item.embedding));
      inputTokens += answer.usage?.prompt_tokens ?? 0;
    }
    if (vectors[0]) {
      if (this.learned && vectors[0].length !== this.learned)
        throw providerFailed(t, `expected ${this.learned}-dimensional embeddings, got ${vectors[0].length}`);
      this.learned = vectors[0].length;
    }
    this.lastUsage = { input_tokens: inputTokens, output_tokens: 0 };
    return vectors;
  }
}

const AUDIO_EXTENSIONS: Record<string, string> = {
  "audio/mpeg": "mp3",
  "audio/mp3": "mp3",
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/webm": "webm",
  "audio/ogg": "ogg",
  "audio/flac": "flac",
  "audio/mp4": "m4a",
  "audio/m4a": "m4a",
  "audio/x-m4a": "m4a",
};

export class OpenAiTranscriber implements Transcriber {
  readonly model: string;

  constructor(
    private readonly endpoint: OpenAiEndpoint,
    private readonly remoteModel: string,
  ) {
    this.model = `${endpoint.connection}/${remoteModel}`;
  }

  async transcribe(audio: Uint8Array, mimeType: string): Promise<{ text: string }> {
    const form = new FormData();
    const extension = AUDIO_EXTENSIONS[mimeType.toLowerCase()] ?? "bin";
    form.append("file", new File([audio], `audio.${extension}`, { type: mimeType }));
    form.append("model", this.remoteModel);
    form.append("response_format", "json");
    const answer = await sendJson<{ text?: string }>(
      this.endpoint.transport,
      joinUrl(this.endpoint.baseUrl, "audio/transcriptions"),
      {
        method: "POST",
        headers: headers(this.endpoint, false),
        body: form,
      },
    );
    if (typeof answer.text !== "string") throw providerFailed(this.endpoint.transport, "the answer held no text");
    return { text: answer.text };
  }
}
