import type { ChatMessage } from "../../providers/types";
import { answerOutputName } from "./agent-definition";
import type { AgentRunInit, AgentRunRecord, AgentRunStatus, PendingCall, ToolResult } from "./agent-run-store";

/** What callers see of a run: its state, outputs, every step so far and the calls it waits for. */
export interface AgentRunView {
  run_id: string;
  agent_id: string;
  status: AgentRunStatus;
  error: string | null;
  outputs: Record<string, string>;
  steps: AgentStep[];
  pending: PendingCall[];
  usage: { input_tokens: number; output_tokens: number };
  model_turns: number;
  version: number;
}

export type AgentStep =
  | { type: "model"; text: string; tool_calls: { id: string; name: string; arguments: Record<string, unknown> }[] }
  | { type: "tool_result"; call_id: string; name: string; content: string; is_error: boolean };

export type AgentRunEvent =
  | { type: "token"; text: string }
  | { type: "tool_call"; id: string; name: string; arguments: Record<string, unknown> }
  | { type: "tool_result"; id: string; name: string; content: string; is_error: boolean }
  | { type: "paused"; pending: PendingCall[] }
  | { type: "final"; run_id: string; outputs: Record<string, string> }
  | { type: "error"; run_id: string; state: string; error: string };

export function runView(
  run: AgentRunRecord,
  messages: ChatMessage[],
  results: Map<string, ToolResult>,
  pending: PendingCall[],
): AgentRunView {
  const names = new Map<string, string>();
  const steps: AgentStep[] = [];
  const listed = new Set<string>();
  for (const message of messages) {
    if (message.role === "assistant") {
      const calls = (message.toolCalls ?? []).map((c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
      for (const c of calls) names.set(c.id, c.name);
      steps.push({ type: "model", text: message.content, tool_calls: calls });
    } else if (message.role === "tool" && message.toolCallId) {
      const result = results.get(message.toolCallId);
      listed.add(message.toolCallId);
      steps.push({
        type: "tool_result",
        call_id: message.toolCallId,
        name: names.get(message.toolCallId) ?? "",
        content: message.content,
        is_error: result?.isError ?? false,
      });
    }
  }
  // Results of the open turn saved before the turn closed (a paused or failed run) are steps too.
  for (const [id, result] of results) {
    if (!listed.has(id) && names.has(id))
      steps.push({
        type: "tool_result",
        call_id: id,
        name: names.get(id) ?? "",
        content: result.content,
        is_error: result.isError,
      });
  }
  return {
    run_id: run.init.runId,
    agent_id: run.init.agentId,
    status: run.status,
    error: run.error,
    outputs: run.status === "completed" ? { [answerOutputName(run.init.definition)]: run.output ?? "" } : {},
    steps,
    pending: run.status === "paused" ? pending : [],
    usage: { input_tokens: run.inputTokens, output_tokens: run.outputTokens },
    model_turns: run.steps,
    version: run.version,
  };
}

export function systemPrompt(init: AgentRunInit): string {
  const parts = [init.definition.instructions || "You are a helpful agent. Use the tools when they help, then answer."];
  if (init.additionalInstructions) parts.push(init.additionalInstructions);
  return parts.join("\n\n");
}

/** The run's inputs as the first user turn: one line per input (a lone input is sent as is). */
export function userPrompt(init: AgentRunInit): string {
  const entries = Object.entries(init.inputs);
  if (entries.length === 1) return stringify(entries[0][1]);
  return entries.map(([name, value]) => `${name}: ${stringify(value)}`).join("\n");
}

function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && "raw_bytes" in value)
    return `(file ${String((value as { metadata?: { name?: string } }).metadata?.name ?? "")})`;
  return JSON.stringify(value);
}

/**
 * The run's events as server-sent events (`event: <type>` and a JSON `data` line), ending when
 * the run settles: `subscribe` receives a listener and answers how to remove it.
 */
export function runEventsStream(
  subscribe: (listener: (event: AgentRunEvent | null) => void) => () => void,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let unsubscribe: (() => void) | null = null;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let closed = false;
      unsubscribe = subscribe((event) => {
        if (closed) return;
        if (event === null) {
          closed = true;
          unsubscribe?.();
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
      });
    },
    cancel() {
      unsubscribe?.();
    },
  });
}
