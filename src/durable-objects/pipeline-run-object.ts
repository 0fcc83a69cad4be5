import { DurableObject } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import type { Env } from "../env";
import { ownSchema } from "./sqlite-schema";
import { PIPELINE_RUN_SCHEMA } from "./pipeline-run-object.schema";
import { database } from "../db/client";
import { pipelineRuns } from "../db/schema/pipelines";
import { AppError } from "../lib/errors";
import { newId } from "../lib/ids";
import type { NodeSpec } from "../features/pipelines/pipeline-nodes";
import { executeNode, passThrough } from "../features/pipelines/node-executors";
import { NodeFailure, type NodeServices } from "../features/pipelines/pipeline-services";
import { productionDeps, type Deps } from "../deps";
import { allDone, FINISHED, planNodes, SETTLED, type NodeState } from "../features/pipelines/run-state";
import {
  iso,
  RunStore,
  type RunActionResult,
  type RunInit,
  type RunRecord,
  type RunView,
} from "../features/pipelines/run-store";
import { causeChain, logEvent, setIsolateLogLevel } from "../lib/log";

export type { RunActionResult, RunInit, RunView } from "../features/pipelines/run-store";

/** If the object is evicted mid-run, this alarm (kept ahead while driving) picks the run up again. */
const LEASE_MS = 60_000;
/** How soon a failed write to the D1 run index is tried again. */
const INDEX_RETRY_MS = 30_000;
/** Largest serialized output one node may produce (a SQLite row holds at most 2 MB). */
const MAX_NODE_OUTPUT_BYTES = 1024 * 1024;

function messageOf(error: unknown): string {
  if (error instanceof NodeFailure || error instanceof AppError) return error.message;
  if (error instanceof Error && error.name === "AbortError") return "the node was cancelled";
  logEvent("error", "pipeline_node_failed", { cause: causeChain(error) });
  return "internal error while running the node";
}

const specOf = (run: RunRecord, id: string): NodeSpec => run.graph.nodes.find((n) => n.id === id) as NodeSpec;

/**
 * One pipeline run: its state machine (queued -> running -> paused / completed / failed /
 * terminated). Every change is written to the object's SQLite before anything depends on it, so
 * an evicted or restarted object continues from its alarm without losing a finished node or
 * repeating one. A node found `running` with no execution in this instance was interrupted by a
 * crash: it runs again (a sub-pipeline node re-attaches to the child run whose id it persisted).
 */
export class PipelineRunObject extends DurableObject<Env> {
  private readonly services: NodeServices;
  private readonly store: RunStore;
  private driving: Promise<void> | null = null;
  private readonly inflight = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly listeners = new Set<() => void>();

  /** The runtime builds it with the production implementations; a test entry may pass fakes (test/worker.ts). */
  constructor(ctx: DurableObjectState, env: Env, deps: Deps = productionDeps) {
    super(ctx, env);
    setIsolateLogLevel(env.LOG_LEVEL);
    this.services = deps.nodeServices(env);
    ownSchema(ctx, PIPELINE_RUN_SCHEMA);
    this.store = new RunStore(ctx.storage.sql);
  }

  // ---- RPC ------------------------------------------------------------------------------

  /** Creates the run (idempotent: a second start with the same id answers the existing run). */
  async start(init: RunInit): Promise<RunView> {
    const existing = this.store.view();
    if (existing) return existing;
    const now = Date.now();
    this.store.create(init, now);
    if (init.background) {
      await this.ctx.storage.setAlarm(now + (init.startDelayMs ?? 0));
    } else {
      await this.ctx.storage.setAlarm(now + LEASE_MS);
      void this.drive();
    }
    return this.store.view() as RunView;
  }

  async status(): Promise<RunView | null> {
    return this.store.view();
  }

  /** Answers once the run is paused or finished, or when `timeoutMs` passes (then still in progress). */
  async waitUntilSettled(timeoutMs: number): Promise<RunView | null> {
    return this.waitFor(timeoutMs, (run) => SETTLED.has(run.status));
  }

  /** Answers as soon as the run's version passes `known`, or it is settled, or on timeout. */
  async waitForChange(known: number, timeoutMs: number): Promise<RunView | null> {
    return this.waitFor(timeoutMs, (run) => run.version > known || SETTLED.has(run.status));
  }

  async pause(): Promise<RunActionResult> {
    const run = this.store.run();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (run.status !== "running" && run.status !== "queued")
      return this.refuse(run, "cannot be paused: only a queued or running run can");
    // Nodes already executing finish and keep their result; no new node starts.
    this.store.setStatus("paused", null);
    this.notify();
    await this.ctx.storage.deleteAlarm();
    await this.syncIndex();
    return { ok: true, run: this.store.view() as RunView };
  }

  /**
   * Resumes a paused run. `approvals` names the approval nodes the caller was allowed to approve
   * (checked by the service against what it saw); if any other node waits now, nothing changes.
   */
  async resume(approvals: string[] = []): Promise<RunActionResult> {
    const run = this.store.run();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (run.status !== "paused") return this.refuse(run, "is not paused");
    const states = this.store.nodes();
    const waiting = [...states.values()].filter((s) => s.status === "awaiting_approval");
    const unapproved = waiting.filter((s) => !approvals.includes(s.id)).map((s) => s.id);
    if (unapproved.length > 0)
      return this.refuse(
        run,
        `is waiting for approval at node ${unapproved.join(", ")}, which this request does not approve`,
      );
    const now = Date.now();
    for (const state of waiting)
      this.store.markCompleted(state.id, passThrough(specOf(run, state.id), { graph: run.graph, states }), now);
    this.store.setStatus("running", null);
    this.notify();
    await this.ctx.storage.setAlarm(now);
    await this.syncIndex();
    return { ok: true, run: this.store.view() as RunView };
  }

  async terminate(): Promise<RunActionResult> {
    const run = this.store.run();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (FINISHED.has(run.status))
      return this.refuse(run, "cannot be terminated: only a queued, running or paused run can");
    this.finishRun("terminated", "terminated by request");
    await this.ctx.storage.deleteAlarm();
    await this.syncIndex();
    return { ok: true, run: this.store.view() as RunView };
  }

  /** Continues the run. Safe to run twice: a second alarm joins the drive in progress, or finds nothing to do. */
  override async alarm(): Promise<void> {
    if (this.store.indexPending()) await this.syncIndex();
    await this.drive();
  }

  // ---- driving --------------------------------------------------------------------------

  private drive(): Promise<void> {
    if (!this.driving) {
      this.driving = this.loop().finally(() => {
        this.driving = null;
      });
    }
    return this.driving;
  }

  private async loop(): Promise<void> {
    try {
      const status = this.store.run()?.status;
      if (status === "running" || status === "queued") await this.ctx.storage.setAlarm(Date.now() + LEASE_MS);
      for (;;) {
        const progressed = await this.step();
        if (this.inflight.size > 0) {
          await Promise.race([...this.inflight.values()].map((f) => f.done));
          continue;
        }
        if (!progressed) break;
      }
    } catch (error) {
      // A bug in the engine fails the run rather than leaving it stuck.
      logEvent("error", "pipeline_run_failed", { cause: causeChain(error) });
      const run = this.store.run();
      if (run && !FINISHED.has(run.status)) {
        this.finishRun("failed", "internal error while running the pipeline");
        await this.syncIndex();
      }
    }
    await this.armAlarm();
  }

  /** One planning pass: records skips, starts ready nodes, pauses at approvals, completes the run. True if anything changed. */
  private async step(): Promise<boolean> {
    const run = this.store.run();
    if (!run) return false;
    if (run.status === "queued") {
      // The index counts queued and running alike (both are in progress), so it is not written here.
      this.store.markStarted(Date.now());
      this.notify();
      return true;
    }
    if (run.status !== "running") return false;
    const states = this.store.nodes();
    const now = Date.now();
    let changed = false;

    for (const state of states.values()) {
      if (state.status === "running" && !this.inflight.has(state.id)) {
        // Interrupted by a crash or eviction: it never finished, so it runs again.
        this.store.markPending(state.id);
        state.status = "pending";
        changed = true;
      }
      if (state.status === "sleeping" && (state.wakeAt ?? 0) <= now) {
        this.complete(state, passThrough(specOf(run, state.id), { graph: run.graph, states }), now);
        changed = true;
      }
    }

    const plan = planNodes(run.graph, states);
    for (const id of plan.skip) {
      this.store.markSkipped(id, now);
      (states.get(id) as NodeState).status = "skipped";
      changed = true;
    }

    const approvals = plan.ready.filter((id) => specOf(run, id).type === "approval");
    if (approvals.length > 0) {
      for (const id of approvals) this.store.markAwaitingApproval(id, now);
      this.store.setStatus("paused", null);
      this.notify();
      await this.syncIndex();
      return true;
    }

    let steps = run.steps;
    for (const id of plan.ready) {
      const node = specOf(run, id);
      const state = states.get(id) as NodeState;
      if (node.type === "wait") {
        if (node.config.seconds <= 0) this.complete(state, passThrough(node, { graph: run.graph, states }), now);
        else this.store.markSleeping(id, now, now + node.config.seconds * 1000);
        changed = true;
        continue;
      }
      if (steps >= run.maxSteps) {
        this.finishRun(
          "failed",
          `run exceeded its limit of ${run.maxSteps} steps (max_steps) before node ${id} could run`,
        );
        await this.syncIndex();
        return true;
      }
      steps += 1;
      this.launch(node, state, run, states);
      changed = true;
    }

    if (this.inflight.size === 0 && allDone(this.store.nodes().values())) {
      this.finishRun("completed", null);
      await this.syncIndex();
      return true;
    }
    if (changed) this.changed();
    return changed;
  }

  private launch(node: NodeSpec, state: NodeState, run: RunRecord, states: Map<string, NodeState>): void {
    const childRunId = node.type === "pipeline" ? (state.childRunId ?? newId()) : null;
    this.store.markRunning(node.id, childRunId, Date.now());
    const controller = new AbortController();
    const timeoutMs =
      node.config.timeout_seconds !== undefined ? node.config.timeout_seconds * 1000 : run.nodeTimeoutMs;
    const execution = executeNode(node, {
      auth: run.auth,
      services: this.services,
      graph: run.graph,
      states,
      inputs: run.inputs,
      runId: run.runId,
      depth: run.depth,
      signal: controller.signal,
      childRunId,
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new NodeFailure(`node ${node.id} timed out after ${timeoutMs / 1000} seconds`));
      }, timeoutMs);
    });
    const done = Promise.race([execution, timeout])
      .then(
        (outputs) => this.onNodeDone(node.id, outputs),
        (error: unknown) => this.onNodeFailed(node.id, error),
      )
      .finally(() => {
        if (timer !== undefined) clearTimeout(timer);
        this.inflight.delete(node.id);
      });
    this.inflight.set(node.id, { controller, done });
  }

  private async onNodeDone(id: string, outputs: Record<string, unknown>): Promise<void> {
    const run = this.store.run();
    const state = this.store.nodes().get(id);
    if (!run || !state || state.status !== "running") return;
    if (FINISHED.has(run.status)) {
      // A terminated or failed run keeps nothing a late node produced.
      this.store.markCancelled(id, Date.now());
      this.changed();
      return;
    }
    const size = JSON.stringify(outputs ?? {}).length;
    if (size > MAX_NODE_OUTPUT_BYTES)
      return this.onNodeFailed(
        id,
        new NodeFailure(`node ${id} produced ${size} bytes of output; the limit is ${MAX_NODE_OUTPUT_BYTES}`),
      );
    // Paused runs keep the result: pausing stops new nodes, not finished work.
    this.complete(state, outputs ?? {}, Date.now());
    this.changed();
  }

  private async onNodeFailed(id: string, error: unknown): Promise<void> {
    const run = this.store.run();
    if (!run) return;
    const now = Date.now();
    if (FINISHED.has(run.status)) {
      this.store.markCancelled(id, now);
      this.changed();
      return;
    }
    const message = messageOf(error);
    this.store.markFailed(id, message, now);
    this.finishRun("failed", message.startsWith(`node ${id}`) ? message : `node ${id} failed: ${message}`);
    await this.syncIndex();
  }

  // ---- state ----------------------------------------------------------------------------

  private complete(state: NodeState, outputs: Record<string, unknown>, now: number): void {
    this.store.markCompleted(state.id, outputs, now);
    state.status = "completed";
    state.outputs = outputs;
  }

  /** Ends the run; nodes still executing are aborted and their late results dropped. */
  private finishRun(status: "completed" | "failed" | "terminated", error: string | null): void {
    this.store.finish(status, error, Date.now());
    if (status !== "completed") for (const { controller } of this.inflight.values()) controller.abort();
    this.notify();
  }

  private changed(): void {
    this.store.bump();
    this.notify();
  }

  private refuse(run: RunRecord, why: string): RunActionResult {
    return { ok: false, status: run.status, error: `run ${run.runId} is ${run.status} and ${why}` };
  }

  /** After a drive: sleep until the next wait node wakes, keep the lease while running, or clear the alarm. */
  private async armAlarm(): Promise<void> {
    const run = this.store.run();
    if (!run) return;
    if (run.status === "running" || run.status === "queued") {
      const wakes = [...this.store.nodes().values()].filter((s) => s.status === "sleeping").map((s) => s.wakeAt ?? 0);
      const lease: number = Date.now() + LEASE_MS;
      await this.ctx.storage.setAlarm(wakes.length > 0 ? Math.min(...wakes) : lease);
    } else if (this.store.indexPending()) {
      // The index still counts this run as in progress: keep retrying, or its slot is never freed.
      await this.ctx.storage.setAlarm(Date.now() + INDEX_RETRY_MS);
    } else {
      await this.ctx.storage.deleteAlarm();
    }
  }

  /**
   * Copies the run's status to the D1 run index (history, tenancy, concurrency limits). If D1
   * cannot be reached, the write is retried by alarm until it lands: a finished run whose row
   * still said `running` would hold a concurrency slot forever.
   */
  private async syncIndex(): Promise<void> {
    const run = this.store.run();
    if (!run) return;
    try {
      await database(this.env)
        .update(pipelineRuns)
        .set({
          status: run.status,
          error: run.error,
          updatedAt: new Date().toISOString(),
          finishedAt: iso(run.finishedAt),
        })
        .where(eq(pipelineRuns.id, run.runId));
      if (this.store.indexPending()) this.store.setIndexPending(false);
    } catch (error) {
      // The object stays the source of truth; the index catches up on the retry or the next change.
      logEvent("warn", "pipeline_run_index_failed", { run_id: run.runId, cause: causeChain(error) });
      this.store.setIndexPending(true);
      // A run in progress keeps its lease alarm, which retries; a drive re-arms when it ends.
      const inProgress = run.status === "running" || run.status === "queued";
      if (!this.driving && !inProgress) await this.ctx.storage.setAlarm(Date.now() + INDEX_RETRY_MS);
    }
  }

  private async waitFor(timeoutMs: number, done: (run: RunRecord) => boolean): Promise<RunView | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = this.store.run();
      if (!run) return null;
      if (done(run) || Date.now() >= deadline) return this.store.view();
      await this.nextChange(deadline - Date.now());
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  private nextChange(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.listeners.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      this.listeners.add(done);
    });
  }
}
