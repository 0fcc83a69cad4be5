/**
 * The small interfaces every capability uses to reach a model. Each has real implementations
 * (OpenAI-compatible, Anthropic, Cohere-compatible rerank, Workers AI) and offline ones, chosen at
 * the edge of the app from the organization's connections. Tests pick implementations; they do
 * not mock modules.
 */

export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
}

export interface Embedder {
  /** Recorded on a knowledge base; querying with a different model is an error. */
  readonly model: string;
  readonly dimensions: number;
  /**
   * A bag-of-words model: word order and function words mean nothing to it, so a query is
   * embedded from its search terms alone (knowledge-base queries; documents embed whole).
   */
  readonly orderFree?: boolean;
  /** Unit-length vectors, one per text, in order. */
  embed(texts: string[]): Promise<Float32Array[]>;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** For role "tool": which call this answers. */
  toolCallId?: string;
  /** For role "assistant": tool calls it made. */
  toolCalls?: ToolCall[];
}

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  maxTokens?: number;
  temperature?: number;
  /** Aborts the call (timeouts, a terminated run). */
  signal?: AbortSignal;
}

export interface ChatResult {
  text: string;
  toolCalls: ToolCall[];
  usage: TokenUsage;
  /** `<connection>/<model>`, or a built-in's name such as `loom/extractive`. */
  model: string;
}

export type ChatStreamEvent =
  | { type: "text"; text: string }
  | { type: "tool_call"; call: ToolCall }
  | { type: "done"; result: ChatResult };

export interface ChatModel {
  readonly model: string;
  complete(request: ChatRequest): Promise<ChatResult>;
  stream(request: ChatRequest): AsyncIterable<ChatStreamEvent>;
}

export interface RerankResult {
  /** Index into the documents passed in. */
  index: number;
  score: number;
}

export interface Reranker {
  readonly model: string;
  rerank(query: string, documents: string[], topN?: number): Promise<RerankResult[]>;
}

export interface Transcriber {
  readonly model: string;
  transcribe(audio: Uint8Array, mimeType: string): Promise<{ text: string }>;
}
