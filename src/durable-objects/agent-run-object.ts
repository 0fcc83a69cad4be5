import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { AppError } from "../lib/errors";
import { AGENT_RUN_SCHEMA } from "./agent-run-object.schema";
import { ownSchema } from "./sqlite-schema";
import type { ChatMessage, ChatModel, ChatResult, ToolCall } from "../providers/types";
import { answerOutputName } from "../features/agents/agent-definition";
import { agentChatModel } from "../features/agents/agent-models";
import type { AgentRunDeps } from "../features/agents/agent-run-deps";
import { productionDeps, type Deps } from "../deps";
import {
  AGENT_RUN_FINISHED,
  AGENT_RUN_SETTLED,
  AgentRunStore,
  openCalls,
  pendingCalls,
  type AgentRunInit,
  type AgentRunRecord,
  type Decision,
  type PendingCall,
} from "../features/agents/agent-run-store";
import {
  runEventsStream,
  runView,
  systemPrompt,
  userPrompt,
  type AgentRunEvent,
  type AgentRunView,
} from "../features/agents/agent-run-view";
import {
  executeTool,
  failureText,
  presentTools,
  whenAborted,
  type PresentedTool,
} from "../features/agents/agent-tools";

export type { AgentRunView } from "../features/agents/agent-run-view";
export type AgentRunActionResult = { ok: true; run: AgentRunView } | { ok: false; status: string; error: string };

/** If the object is evicted mid-run, this alarm picks the run up again after the last saved step. */
const LEASE_MS = 60_000;
const INDEX_RETRY_MS = 30_000;
export const REFUSED_RESULT = "The user refused this tool call. Do not try it again; answer without it.";

/**
 * One agent run: the tool-calling loop (model turn, tool calls, tool results, next turn ...)
 * with its conversation persisted after every step. A restarted object resumes after the last
 * saved step: a model turn is asked again only if it was never saved, and a tool call whose
 * result was saved never runs again.
 */
export class AgentRunObject extends DurableObject<Env> {
  private readonly store: AgentRunStore;
  private readonly deps: AgentRunDeps;
  private driving: Promise<void> | null = null;
  private controller: AbortController | null = null;
  private tools: PresentedTool[] | null = null;
  /** Resolved once per drive (connection lookup and key decryption), dropped when the drive ends. */
  private model: ChatModel | null = null;
  private readonly listeners = new Set<(event: AgentRunEvent | null) => void>();
  /** Callers of waitUntilSettled: woken once the run settles (settle()); they do not ask for tokens. */
  private readonly waiters = new Set<() => void>();

  /** The runtime builds it with the production implementations; a test entry may pass fakes (test/worker.ts). */
  constructor(ctx: DurableObjectState, env: Env, deps: Deps = productionDeps) {
    super(ctx, env);
    ownSchema(ctx, AGENT_RUN_SCHEMA);
    this.store = new AgentRunStore(ctx.storage.sql);
    this.deps = { services: deps.nodeServices(env), providers: deps.providers };
  }

  // ---- RPC ------------------------------------------------------------------------------

  /** Creates the run and starts driving it (idempotent: a second start answers the existing run). */
  async start(init: AgentRunInit): Promise<AgentRunView> {
    if (!this.store.run()) {
      this.store.create(init, Date.now());
      if (init.startDelayMs !== undefined) {
        await this.ctx.storage.setAlarm(Date.now() + init.startDelayMs);
        return this.view();
      }
      await this.ctx.storage.setAlarm(Date.now() + (init.leaseMs ?? LEASE_MS));
      void this.drive();
    }
    return this.view();
  }

  /** Starts the run and answers its events as server-sent events until it settles. */
  async startStreaming(init: AgentRunInit): Promise<ReadableStream<Uint8Array>> {
    const stream = runEventsStream((listener) => {
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    });
    await this.start(init);
    if (!this.driving) this.settle();
    return stream;
  }

  async status(): Promise<AgentRunView | null> {
    return this.store.run() ? this.view() : null;
  }

  async waitUntilSettled(timeoutMs: number): Promise<AgentRunView | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = this.store.run();
      if (!run) return null;
      if (AGENT_RUN_SETTLED.has(run.status) || Date.now() >= deadline) return this.view();
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
        this.waiters.add(done);
      });
    }
  }

  /** Approves, refuses or answers the calls the paused run waits for; every one must be decided. */
  async decide(decisions: Decision[]): Promise<AgentRunActionResult> {
    const run = this.store.run();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (run.status !== "paused")
      return { ok: false, status: run.status, error: `run ${run.init.runId} is ${run.status}, not paused` };
    const pending = this.pending(run);
    const byId = new Map(decisions.map((d) => [d.callId, d]));
    for (const id of byId.keys())
      if (!pending.some((p) => p.id === id))
        return { ok: false, status: run.status, error: `run ${run.init.runId} does not wait for call ${id}` };
    const undecided = pending.filter((p) => !byId.has(p.id));
    if (undecided.length)
      return {
        ok: false,
        status: run.status,
        error: `run ${run.init.runId} also waits for call ${undecided.map((p) => p.id).join(", ")}, which this request does not decide`,
      };
    for (const p of pending) {
      const d = byId.get(p.id) as Decision;
      if (p.waiting === "question" && d.kind !== "answered")
        return { ok: false, status: run.status, error: `call ${p.id} asks the user a question: answer it` };
      if (p.waiting === "approval" && d.kind === "answered")
        return { ok: false, status: run.status, error: `call ${p.id} needs approval: approve or refuse it` };
    }
    for (const d of byId.values()) this.store.decide(d);
    this.store.setStatus("running", Date.now());
    await this.ctx.storage.setAlarm(Date.now() + (run.init.leaseMs ?? LEASE_MS));
    void this.drive();
    await this.syncIndex();
    return { ok: true, run: this.view() };
  }

  async terminate(): Promise<AgentRunActionResult> {
    const run = this.store.run();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (AGENT_RUN_FINISHED.has(run.status))
      return { ok: false, status: run.status, error: `run ${run.init.runId} already ended (${run.status})` };
    this.finish("terminated", "terminated by request", null);
    await this.syncIndex();
    this.settle();
    return { ok: true, run: this.view() };
  }

  /** Continues the run; safe to run twice (a second alarm joins the drive in progress). */
  override async alarm(): Promise<void> {
    if (this.store.run()?.indexPending) await this.syncIndex();
    await this.drive();
  }

  // ---- the loop ---------------------------------------------------------------------------

  private drive(): Promise<void> {
    if (!this.driving) this.driving = this.loop().finally(() => (this.driving = null));
    return this.driving;
  }

  private async loop(): Promise<void> {
    const first = this.store.run();
    if (first?.status !== "running") return this.armAlarm();
    // The lease: if this instance dies mid-step, this alarm continues the run in a fresh one.
    await this.ctx.storage.setAlarm(Date.now() + (first.init.leaseMs ?? LEASE_MS));
    const remaining = first.init.definition.limits.wallSeconds * 1000 - first.activeMs - (Date.now() - first.resumedAt);
    this.controller = new AbortController();
    const timer = setTimeout(() => this.controller?.abort(), Math.max(0, remaining));
    try {
      while (await this.step());
    } catch (error) {
      const run = this.store.run();
      if (run && !AGENT_RUN_FINISHED.has(run.status)) {
        if (this.controller.signal.aborted && run.status === "running")
          this.finish(
            "failed",
            `run exceeded its wall time of ${run.init.definition.limits.wallSeconds} seconds`,
            null,
          );
        else {
          if (!(error instanceof AppError))
            console.error(
              JSON.stringify({
                level: "error",
                where: "agent run",
                error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
              }),
            );
          this.finish(
            "failed",
            error instanceof AppError ? `the model failed: ${error.message}` : "internal error while running the agent",
            null,
          );
        }
      }
    } finally {
      clearTimeout(timer);
      this.controller = null;
      this.model = null;
    }
    await this.syncIndex();
    await this.armAlarm();
    this.settle();
  }

  /** One step: a batch of tool calls, or one model turn. False when the run stopped (settled). */
  private async step(): Promise<boolean> {
    const run = this.store.run();
    if (run?.status !== "running") return false;
    const signal = (this.controller as AbortController).signal;
    if (signal.aborted) throw new Error("wall time");
    const { definition } = run.init;
    const tools = await this.presented(run);
    const messages = this.store.messages();
    const calls = openCalls(messages);
    if (calls.length > 0) {
      const results = this.store.results();
      const missing = calls.filter((c) => !results.has(c.id));
      if (missing.length === 0) {
        // Every call answered: the results join the conversation, in call order.
        this.store.append(
          ...calls.map(
            (c): ChatMessage => ({
              role: "tool",
              toolCallId: c.id,
              content: (results.get(c.id) as { content: string }).content,
            }),
          ),
        );
        if (run.toolErrors > definition.limits.maxToolErrors) {
          this.finish(
            "failed",
            `run stopped after ${run.toolErrors} tool errors (max_tool_errors is ${definition.limits.maxToolErrors})`,
            null,
          );
          return false;
        }
        return true;
      }
      const pending = this.pending(run);
      if (pending.length > 0) {
        this.store.setStatus("paused", Date.now());
        this.emit({ type: "paused", pending });
        return false;
      }
      const decisions = this.store.decisions();
      // Calls of one turn run concurrently; each result is saved the moment it arrives.
      await Promise.all(missing.map((call) => this.runCall(call, tools, decisions.get(call.id), signal)));
      return true;
    }
    if (run.steps >= definition.limits.maxSteps) {
      this.finish(
        "failed",
        `run reached its step limit of ${definition.limits.maxSteps} model turns (max_steps) without a final answer`,
        null,
      );
      return false;
    }
    if (run.inputTokens + run.outputTokens >= definition.limits.tokenBudget) {
      this.finish(
        "failed",
        `run used ${run.inputTokens + run.outputTokens} tokens, its token budget is ${definition.limits.tokenBudget} (token_budget)`,
        null,
      );
      return false;
    }
    this.model ??= await agentChatModel(this.env, run.init.toolAuth, definition, this.deps.providers);
    const model = this.model;
    const result = await this.ask(model, [this.system(run), this.user(run), ...messages], tools, signal);
    if (signal.aborted) throw new Error("wall time");
    const known = new Set(tools.map((t) => t.definition.name));
    const toolCalls = result.toolCalls.map((c, i) => ({
      ...c,
      id: c.id || `call_${run.steps}_${i}`,
      name: known.has(c.name) ? c.name : c.name.slice(0, 64),
    }));
    this.store.recordTurn(
      { role: "assistant", content: result.text, ...(toolCalls.length ? { toolCalls } : {}) },
      result.usage,
    );
    for (const call of toolCalls)
      this.emit({ type: "tool_call", id: call.id, name: call.name, arguments: call.arguments });
    if (toolCalls.length === 0) {
      this.finish("completed", null, result.text);
      return false;
    }
    return true;
  }

  private async ask(
    model: ChatModel,
    messages: ChatMessage[],
    tools: PresentedTool[],
    signal: AbortSignal,
  ): Promise<ChatResult> {
    const request = { messages, tools: tools.map((t) => t.definition), signal };
    if (this.listeners.size === 0) return model.complete(request);
    for await (const event of model.stream(request)) {
      if (event.type === "text") this.emit({ type: "token", text: event.text });
      if (event.type === "done") return event.result;
    }
    throw new AppError("provider_failed", "the model's stream ended without an answer");
  }

  private async runCall(
    call: ToolCall,
    tools: PresentedTool[],
    decision: Decision | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    let content: string;
    let isError = false;
    const presented = tools.find((t) => t.definition.name === call.name);
    if (!presented)
      [content, isError] = [
        `there is no tool named '${call.name.slice(0, 64)}'; the tools are ${tools.map((t) => t.definition.name).join(", ") || "none"}`,
        true,
      ];
    else if (decision?.kind === "refused") content = REFUSED_RESULT;
    else if (decision?.kind === "answered") content = decision.answer;
    else {
      const problem = presented.check(call.arguments);
      if (problem) [content, isError] = [`invalid arguments for ${call.name}: ${problem}`, true];
      else {
        try {
          const run = this.store.run() as AgentRunRecord;
          const execution = executeTool(presented, call, {
            env: this.env,
            auth: run.init.toolAuth,
            services: this.deps.services,
            signal,
            runChildAgent: (id, input, c, s) => this.runChild(run, id, input, c, s),
          });
          // A tool that ignores the signal still cannot hold the run past its wall time.
          content = await Promise.race([execution, whenAborted(signal)]);
        } catch (error) {
          if (signal.aborted) throw error;
          [content, isError] = [`the tool failed: ${failureText(error)}`, true];
        }
      }
    }
    if (this.store.run()?.status !== "running") return;
    if (this.store.saveResult({ callId: call.id, content, isError }))
      this.emit({ type: "tool_result", id: call.id, name: call.name, content, is_error: isError });
  }

  private async runChild(
    run: AgentRunRecord,
    agentId: string,
    input: string,
    call: ToolCall,
    signal: AbortSignal,
  ): Promise<string> {
    const { runChildAgent } = await import("../features/agents/agent-runs.service");
    return runChildAgent(this.env, run.init, agentId, input, call.id, signal);
  }

  // ---- state ------------------------------------------------------------------------------

  private async presented(run: AgentRunRecord): Promise<PresentedTool[]> {
    this.tools ??= await presentTools(this.env, run.init.toolAuth, run.init.definition.tools);
    return this.tools;
  }

  private pending(run: AgentRunRecord): PendingCall[] {
    return pendingCalls(run, this.store.messages(), this.store.results(), this.store.decisions());
  }

  private system(run: AgentRunRecord): ChatMessage {
    return { role: "system", content: systemPrompt(run.init) };
  }

  private user(run: AgentRunRecord): ChatMessage {
    return { role: "user", content: userPrompt(run.init) };
  }

  private finish(status: "completed" | "failed" | "terminated", error: string | null, output: string | null): void {
    this.store.finish(status, error, output, Date.now());
    this.controller?.abort();
    const run = this.store.run() as AgentRunRecord;
    if (status === "completed")
      this.emit({
        type: "final",
        run_id: run.init.runId,
        outputs: { [answerOutputName(run.init.definition)]: output ?? "" },
      });
    else this.emit({ type: "error", run_id: run.init.runId, state: status, error: error ?? status });
  }

  /**
   * Ends the streams and wakes waitUntilSettled once a settled run's D1 index and alarm are
   * written: a caller answered then (a run list read right after, a test ending) never races the
   * object's own last writes.
   */
  private settle(): void {
    if (!AGENT_RUN_SETTLED.has(this.store.run()?.status ?? "running")) return;
    this.emit(null);
    for (const waiter of [...this.waiters]) waiter();
  }

  private view(): AgentRunView {
    const run = this.store.run() as AgentRunRecord;
    return runView(run, this.store.messages(), this.store.results(), this.pending(run));
  }

  private emit(event: AgentRunEvent | null): void {
    for (const listener of [...this.listeners]) listener(event);
  }

  private async armAlarm(): Promise<void> {
    const run = this.store.run();
    if (!run) return;
    if (run.status === "running") await this.ctx.storage.setAlarm(Date.now() + (run.init.leaseMs ?? LEASE_MS));
    else if (run.indexPending) await this.ctx.storage.setAlarm(Date.now() + INDEX_RETRY_MS);
    else await this.ctx.storage.deleteAlarm();
  }

  /** Mirrors the status into the D1 run index (history, run lists); retried by alarm if D1 fails. */
  private async syncIndex(): Promise<void> {
    const run = this.store.run();
    if (!run) return;
    try {
      const { writeRunIndex } = await import("../features/agents/agent-runs.service");
      await writeRunIndex(this.env, run);
      if (run.indexPending) this.store.setIndexPending(false);
    } catch (error) {
      console.error(
        JSON.stringify({
          level: "error",
          where: "agent run index",
          runId: run.init.runId,
          error: error instanceof Error ? error.message : String(error),
        }),
      );
      this.store.setIndexPending(true);
    }
  }
}
