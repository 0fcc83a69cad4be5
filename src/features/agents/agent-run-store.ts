import type { AuthContext } from "../../env";
import type { ChatMessage, ToolCall } from "../../providers/types";
import type { AgentDefinition } from "./agent-definition";

/**
 * The SQLite of one AgentRunObject: the run, the loop's conversation (every model turn and tool
 * result, appended in order) and the results of the calls of the current turn, each saved the
 * moment it arrives, so a restarted object never runs again a call whose result was saved.
 */

export type AgentRunStatus = "running" | "paused" | "completed" | "failed" | "terminated";
export const AGENT_RUN_SETTLED = new Set<AgentRunStatus>(["paused", "completed", "failed", "terminated"]);
export const AGENT_RUN_FINISHED = new Set<AgentRunStatus>(["completed", "failed", "terminated"]);

export interface AgentRunInit {
  runId: string;
  agentId: string;
  agentName: string;
  /** Whose rights the tools have: the agent's owner, never the caller or a publisher. */
  toolAuth: AuthContext;
  startedBy: string;
  definition: AgentDefinition;
  inputs: Record<string, unknown>;
  additionalInstructions: string | null;
  depth: number;
  /** Tests and the bench shorten the lease; production leaves it unset. */
  leaseMs?: number;
  /** A background run: started by the object's alarm after this delay instead of at once. */
  startDelayMs?: number;
}

export interface ToolResult {
  callId: string;
  content: string;
  isError: boolean;
}

export interface PendingCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** approval: the tool needs approval; question: ask_user waits for an answer. */
  waiting: "approval" | "question";
}

export type Decision =
  | { callId: string; kind: "approved" | "refused" }
  | { callId: string; kind: "answered"; answer: string };

export interface AgentRunRecord {
  init: AgentRunInit;
  status: AgentRunStatus;
  error: string | null;
  output: string | null;
  inputTokens: number;
  outputTokens: number;
  steps: number;
  toolErrors: number;
  /** Milliseconds spent running (paused time excluded), up to the last time the run was paused or resumed. */
  activeMs: number;
  /** When the current running stretch began. */
  resumedAt: number;
  version: number;
  indexPending: boolean;
}

export class AgentRunStore {
  /** The tables are AGENT_RUN_SCHEMA's, applied by the object's constructor before any call. */
  constructor(private readonly sql: SqlStorage) {}

  create(init: AgentRunInit, now: number): void {
    this.sql.exec(
      "INSERT INTO run (id, init, status, resumed_at) VALUES (1, ?, 'running', ?)",
      JSON.stringify(init),
      now,
    );
  }

  run(): AgentRunRecord | null {
    const row = this.sql.exec("SELECT * FROM run WHERE id = 1").toArray()[0];
    if (!row) return null;
    return {
      init: JSON.parse(String(row.init)) as AgentRunInit,
      status: row.status as AgentRunStatus,
      error: row.error === null ? null : String(row.error),
      output: row.output === null ? null : String(row.output),
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      steps: Number(row.steps),
      toolErrors: Number(row.tool_errors),
      activeMs: Number(row.active_ms),
      resumedAt: Number(row.resumed_at),
      version: Number(row.version),
      indexPending: Number(row.index_pending) === 1,
    };
  }

  messages(): ChatMessage[] {
    return this.sql
      .exec("SELECT json FROM messages ORDER BY seq")
      .toArray()
      .map((r) => JSON.parse(String(r.json)) as ChatMessage);
  }

  append(...messages: ChatMessage[]): void {
    for (const message of messages) this.sql.exec("INSERT INTO messages (json) VALUES (?)", JSON.stringify(message));
    this.bump();
  }

  /** A model turn: its message and what it cost, in one write. */
  recordTurn(message: ChatMessage, usage: { input_tokens: number; output_tokens: number }): void {
    this.sql.exec(
      "UPDATE run SET steps = steps + 1, input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = 1",
      usage.input_tokens,
      usage.output_tokens,
    );
    this.append(message);
  }

  results(): Map<string, ToolResult> {
    const out = new Map<string, ToolResult>();
    for (const r of this.sql.exec("SELECT * FROM results").toArray())
      out.set(String(r.call_id), {
        callId: String(r.call_id),
        content: String(r.content),
        isError: Number(r.is_error) === 1,
      });
    return out;
  }

  /** Saves one call's result; a second result for the same call is ignored (the first one stands). */
  saveResult(result: ToolResult): boolean {
    const before = this.sql.exec("SELECT call_id FROM results WHERE call_id = ?", result.callId).toArray().length;
    if (before) return false;
    this.sql.exec(
      "INSERT INTO results (call_id, content, is_error) VALUES (?, ?, ?)",
      result.callId,
      result.content,
      result.isError ? 1 : 0,
    );
    if (result.isError) this.sql.exec("UPDATE run SET tool_errors = tool_errors + 1 WHERE id = 1");
    this.bump();
    return true;
  }

  decisions(): Map<string, Decision> {
    const out = new Map<string, Decision>();
    for (const r of this.sql.exec("SELECT * FROM decisions").toArray()) {
      const kind = String(r.kind) as Decision["kind"];
      out.set(
        String(r.call_id),
        kind === "answered"
          ? { callId: String(r.call_id), kind, answer: String(r.answer ?? "") }
          : { callId: String(r.call_id), kind },
      );
    }
    return out;
  }

  decide(decision: Decision): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO decisions (call_id, kind, answer) VALUES (?, ?, ?)",
      decision.callId,
      decision.kind,
      decision.kind === "answered" ? decision.answer : null,
    );
  }

  setStatus(status: AgentRunStatus, now: number): void {
    const run = this.run();
    if (!run) return;
    // Wall time counts running stretches only: pausing banks the stretch, resuming starts a new one.
    if (run.status === "running" && status !== "running")
      this.sql.exec("UPDATE run SET active_ms = active_ms + ? WHERE id = 1", Math.max(0, now - run.resumedAt));
    if (status === "running" && run.status !== "running")
      this.sql.exec("UPDATE run SET resumed_at = ? WHERE id = 1", now);
    this.sql.exec("UPDATE run SET status = ? WHERE id = 1", status);
    this.bump();
  }

  finish(
    status: "completed" | "failed" | "terminated",
    error: string | null,
    output: string | null,
    now: number,
  ): void {
    this.setStatus(status, now);
    this.sql.exec("UPDATE run SET error = ?, output = ? WHERE id = 1", error, output);
    this.bump();
  }

  setIndexPending(pending: boolean): void {
    this.sql.exec("UPDATE run SET index_pending = ? WHERE id = 1", pending ? 1 : 0);
  }

  bump(): void {
    this.sql.exec("UPDATE run SET version = version + 1 WHERE id = 1");
  }
}

/** The calls of the last model turn, when that turn asked for tools. */
export function openCalls(messages: ChatMessage[]): ToolCall[] {
  const last = messages[messages.length - 1];
  return last?.role === "assistant" && last.toolCalls?.length ? last.toolCalls : [];
}

/** Calls of the open turn that wait for a person: unanswered questions, unapproved tools. */
export function pendingCalls(
  run: AgentRunRecord,
  messages: ChatMessage[],
  results: Map<string, ToolResult>,
  decisions: Map<string, Decision>,
): PendingCall[] {
  const byName = new Map(run.init.definition.tools.map((t) => [t.callName, t]));
  const out: PendingCall[] = [];
  for (const call of openCalls(messages)) {
    const tool = byName.get(call.name);
    if (!tool || results.has(call.id) || decisions.has(call.id)) continue;
    if (tool.kind === "ask_user")
      out.push({ id: call.id, name: call.name, arguments: call.arguments, waiting: "question" });
    else if (tool.requiresApproval)
      out.push({ id: call.id, name: call.name, arguments: call.arguments, waiting: "approval" });
  }
  return out;
}
