import { joinUrl, providerFailed, send, sendJson, type ProviderTransport } from "./http";
import { readSse } from "./sse";
import type { ChatMessage, ChatModel, ChatRequest, ChatResult, ChatStreamEvent, ToolCall, TokenUsage } from "./types";
import { parseArguments } from "./usage";

/** Anthropic's Messages API (`POST /v1/messages`), including its server-sent event stream. */
export interface AnthropicEndpoint {
  transport: ProviderTransport;
  baseUrl: string;
  secret: string | null;
  connection: string;
}

export const ANTHROPIC_VERSION = "2023-06-01";
/** The Messages API requires max_tokens; this is the default when a caller sets none. */
const DEFAULT_MAX_TOKENS = 1024;

type ContentBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> }
  | { type: "tool_result"; tool_use_id: string; content: string };

interface WireMessage {
  role: "user" | "assistant";
  content: ContentBlock[];
}

interface MessagesResponse {
  content?: ContentBlock[];
  usage?: { input_tokens?: number; output_tokens?: number };
}

type StreamEvent =
  | { type: "message_start"; message: { usage?: { input_tokens?: number; output_tokens?: number } } }
  | {
      type: "content_block_start";
      index: number;
      content_block: { type: string; text?: string; id?: string; name?: string };
    }
  | {
      type: "content_block_delta";
      index: number;
      delta:
        | { type: "text_delta"; text: string }
        | { type: "input_json_delta"; partial_json: string }
        | { type: string };
    }
  | { type: "content_block_stop"; index: number }
  | { type: "message_delta"; usage?: { output_tokens?: number } }
  | { type: "message_stop" }
  | { type: "ping" }
  | { type: "error"; error?: { type?: string; message?: string } };

const ANTHROPIC_ERROR_TYPES = new Set([
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "not_found_error",
  "request_too_large",
  "rate_limit_error",
  "api_error",
  "overloaded_error",
]);

function messagesUrl(baseUrl: string): string {
  return /\/v1\/?$/.test(baseUrl) ? joinUrl(baseUrl, "messages") : joinUrl(baseUrl, "v1/messages");
}

/** System text goes in the top-level `system`; tool results ride in user turns; same-role turns merge. */
function wire(messages: ChatMessage[]): { system: string; messages: WireMessage[] } {
  const system = messages.filter((m) => m.role === "system").map((m) => m.content);
  const out: WireMessage[] = [];
  for (const message of messages) {
    if (message.role === "system") continue;
    const role: WireMessage["role"] = message.role === "assistant" ? "assistant" : "user";
    const blocks: ContentBlock[] = [];
    if (message.role === "tool")
      blocks.push({ type: "tool_result", tool_use_id: message.toolCallId ?? "", content: message.content });
    else if (message.content) blocks.push({ type: "text", text: message.content });
    for (const call of message.toolCalls ?? [])
      blocks.push({ type: "tool_use", id: call.id, name: call.name, input: call.arguments });
    if (blocks.length === 0) continue;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  }
  return { system: system.join("\n\n"), messages: out };
}

export class AnthropicChatModel implements ChatModel {
  readonly model: string;

  constructor(
    private readonly endpoint: AnthropicEndpoint,
    private readonly remoteModel: string,
  ) {
    this.model = `${endpoint.connection}/${remoteModel}`;
  }

  private headers(): Record<string, string> {
    const result: Record<string, string> = {
      "content-type": "application/json",
      "anthropic-version": ANTHROPIC_VERSION,
    };
    if (this.endpoint.secret) result["x-api-key"] = this.endpoint.secret;
    return result;
  }

  private body(request: ChatRequest, stream: boolean): string {
    const { system, messages } = wire(request.messages);
    return JSON.stringify({
      model: this.remoteModel,
      max_tokens: request.maxTokens ?? DEFAULT_MAX_TOKENS,
      ...(system ? { system } : {}),
      messages,
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.tools?.length
        ? {
            tools: request.tools.map((tool) => ({
              name: tool.name,
              description: tool.description,
              input_schema: tool.parameters,
            })),
          }
        : {}),
      ...(stream ? { stream: true } : {}),
    });
  }

  async complete(request: ChatRequest): Promise<ChatResult> {
    const answer = await sendJson<MessagesResponse>(
      this.endpoint.transport,
      messagesUrl(this.endpoint.baseUrl),
      { method: "POST", headers: this.headers(), body: this.body(request, false) },
      request.signal,
    );
    let text = "";
    const toolCalls: ToolCall[] = [];
    for (const block of answer.content ?? []) {
      if (block.type === "text") text += block.text;
      else if (block.type === "tool_use")
        toolCalls.push({ id: block.id, name: block.name, arguments: block.input ?? {} });
    }
    return {
      text,
      toolCalls,
      usage: { input_tokens: answer.usage?.input_tokens ?? 0, output_tokens: answer.usage?.output_tokens ?? 0 },
      model: this.model,
    };
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const t = this.endpoint.transport;
    const { response, deadline } = await send(
      t,
      messagesUrl(this.endpoint.baseUrl),
      { method: "POST", headers: { ...this.headers(), accept: "text/event-stream" }, body: this.body(request, true) },
      request.signal,
    );
    if (!response.body) throw providerFailed(t, "the stream had no body");
    let text = "";
    const usage: TokenUsage = { input_tokens: 0, output_tokens: 0 };
    const toolCalls: ToolCall[] = [];
    // A tool_use block's input arrives as JSON fragments between its start and stop events.
    const openTools = new Map<number, { id: string; name: string; json: string }>();
    let stopped = false;
    for await (const sse of readSse(response.body, deadline)) {
      let event: StreamEvent;
      try {
        event = JSON.parse(sse.data) as StreamEvent;
      } catch {
        throw providerFailed(t, "the stream held an event that was not JSON");
      }
      switch (event.type) {
        case "message_start":
          usage.input_tokens = event.message.usage?.input_tokens ?? 0;
          usage.output_tokens = event.message.usage?.output_tokens ?? 0;
          break;
        case "content_block_start":
          if (event.content_block.type === "tool_use")
            openTools.set(event.index, {
              id: event.content_block.id ?? "",
              name: event.content_block.name ?? "",
              json: "",
            });
          else if (event.content_block.text) {
            text += event.content_block.text;
            yield { type: "text", text: event.content_block.text };
          }
          break;
        case "content_block_delta": {
          const delta = event.delta;
          if (delta.type === "text_delta" && "text" in delta) {
            text += delta.text;
            yield { type: "text", text: delta.text };
          } else if (delta.type === "input_json_delta" && "partial_json" in delta) {
            const open = openTools.get(event.index);
            if (open) open.json += delta.partial_json;
          }
          break;
        }
        case "content_block_stop": {
          const open = openTools.get(event.index);
          if (open) {
            openTools.delete(event.index);
            const call: ToolCall = { id: open.id, name: open.name, arguments: parseArguments(open.json) };
            toolCalls.push(call);
            yield { type: "tool_call", call };
          }
          break;
        }
        case "message_delta":
          // The running output count is cumulative, so the last one wins.
          if (event.usage?.output_tokens !== undefined) usage.output_tokens = event.usage.output_tokens;
          break;
        case "message_stop":
          stopped = true;
          break;
        case "error":
          // Only Anthropic's documented error types are named; the message is the server's own text.
          throw providerFailed(
            t,
            `the stream reported ${ANTHROPIC_ERROR_TYPES.has(event.error?.type ?? "") ? event.error?.type : "an error"}`,
          );
        default:
          break;
      }
    }
    // A stream cut off before message_stop is a failed call, not a short answer.
    if (!stopped) throw providerFailed(t, "the stream ended before message_stop");
    yield { type: "done", result: { text, toolCalls, usage, model: this.model } };
  }
}
