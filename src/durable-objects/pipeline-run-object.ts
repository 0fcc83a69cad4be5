import { DurableObject } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import type { AuthContext, Env } from "../env";
import { database } from "../db/client";
import { pipelineRuns, type RunStatus } from "../db/schema/pipelines";
import { AppError } from "../lib/errors";
import { newId } from "../lib/ids";
import type { PipelineGraph } from "../features/pipelines/pipeline-graph";
import type { NodeSpec } from "../features/pipelines/pipeline-nodes";
import { executeNode, passThrough } from "../features/pipelines/node-executors";
import { NodeFailure, nodeServicesProvider, type NodeServices } from "../features/pipelines/pipeline-services";
import { allDone, FINISHED, planNodes, runOutputs, SETTLED, type NodeState, type NodeStatus } from "../features/pipelines/run-state";

/** What the run service hands a new run. The graph is copied in, so deleting or editing the pipeline cannot change a run. */
export interface RunInit {
  runId: string;
  pipelineId: string;
  auth: AuthContext;
  graph: PipelineGraph;
  inputs: Record<string, unknown>;
  maxSteps: number;
  nodeTimeoutMs: number;
  depth: number;
  /** Answer at once and let the alarm drive the run (otherwise the caller's request drives it). */
  background: boolean;
  /** Background runs start this long after creation (0 by default). */
  startDelayMs?: number;
}

export interface NodeView {
  id: string;
  type: string;
  status: NodeStatus;
  outputs: Record<string, unknown> | null;
  error: string | null;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  attempts: number;
}

export interface RunView {
  run_id: string;
  pipeline_id: string;
  status: RunStatus;
  error: string | null;
  outputs: Record<string, unknown>;
  nodes: NodeView[];
  steps: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Grows with every persisted change; streaming waits on it. */
  version: number;
}

export type RunActionResult = { ok: true; run: RunView } | { ok: false; status: RunStatus | "missing"; error: string };

/** If the object is evicted mid-run, this alarm (re-armed while driving) picks the run up again. */
const LEASE_MS = 60_000;
/** Largest serialized output one node may produce (a SQLite row holds at most 2 MB). */
const MAX_NODE_OUTPUT_BYTES = 1024 * 1024;

interface RunRow {
  run_id: string;
  pipeline_id: string;
  auth: string;
  graph: string;
  inputs: string;
  status: RunStatus;
  error: string | null;
  steps: number;
  max_steps: number;
  node_timeout_ms: number;
  depth: number;
  version: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
}

interface NodeRow {
  id: string;
  position: number;
  type: NodeSpec["type"];
  status: NodeStatus;
  outputs: string | null;
  error: string | null;
  started_at: number | null;
  finished_at: number | null;
  attempts: number;
  wake_at: number | null;
  child_run_id: string | null;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function toState(row: NodeRow): NodeState {
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    outputs: row.outputs === null ? null : (JSON.parse(row.outputs) as Record<string, unknown>),
    error: row.error,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    attempts: row.attempts,
    wakeAt: row.wake_at,
    childRunId: row.child_run_id,
  };
}

function messageOf(error: unknown): string {
  if (error instanceof NodeFailure || error instanceof AppError) return error.message;
  if (error instanceof Error && error.name === "AbortError") return "the node was cancelled";
  console.error(JSON.stringify({ level: "error", where: "pipeline node", error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }));
  return "internal error while running the node";
}

/**
 * One pipeline run. Its SQLite holds the run row and one row per node; every change is written
 * before anything depends on it, so an evicted or restarted object continues from its alarm
 * without losing a finished node or repeating one. Nodes found `running` with no execution in
 * this instance were interrupted by a crash: they run again (a sub-pipeline node re-attaches to
 * the child run it already started, by the id persisted before the call).
 */
export class PipelineRunObject extends DurableObject<Env> {
  private readonly services: NodeServices;
  private readonly sql: SqlStorage;
  private driving: Promise<void> | null = null;
  private readonly inflight = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly listeners = new Set<() => void>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.services = nodeServicesProvider.create(env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS run (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1), run_id TEXT NOT NULL, pipeline_id TEXT NOT NULL, auth TEXT NOT NULL,
      graph TEXT NOT NULL, inputs TEXT NOT NULL, status TEXT NOT NULL, error TEXT, steps INTEGER NOT NULL DEFAULT 0,
      max_steps INTEGER NOT NULL, node_timeout_ms INTEGER NOT NULL, depth INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER)`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS nodes (
      id TEXT PRIMARY KEY, position INTEGER NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, outputs TEXT, error TEXT,
      started_at INTEGER, finished_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0, wake_at INTEGER, child_run_id TEXT)`);
  }

  // ---- RPC ------------------------------------------------------------------------------

  /** Creates the run (idempotent: a second start with the same id answers the existing run). */
  async start(init: RunInit): Promise<RunView> {
    if (this.loadRun()) return this.view();
    const now = Date.now();
    this.sql.exec(
      `INSERT INTO run (singleton, run_id, pipeline_id, auth, graph, inputs, status, max_steps, node_timeout_ms, depth, created_at) VALUES (1, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)`,
      init.runId,
      init.pipelineId,
      JSON.stringify(init.auth),
      JSON.stringify(init.graph),
      JSON.stringify(init.inputs),
      init.maxSteps,
      init.nodeTimeoutMs,
      init.depth,
      now,
    );
    init.graph.order.forEach((id, position) => {
      const node = init.graph.nodes.find((n) => n.id === id) as NodeSpec;
      this.sql.exec(`INSERT INTO nodes (id, position, type, status) VALUES (?, ?, ?, 'pending')`, id, position, node.type);
    });
    if (init.background) {
      await this.ctx.storage.setAlarm(now + (init.startDelayMs ?? 0));
    } else {
      await this.ctx.storage.setAlarm(now + LEASE_MS);
      void this.drive();
    }
    return this.view();
  }

  async status(): Promise<RunView | null> {
    return this.loadRun() ? this.view() : null;
  }

  /** Answers once the run is paused or finished, or when `timeoutMs` passes (then still in progress). */
  async waitUntilSettled(timeoutMs: number): Promise<RunView | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = this.loadRun();
      if (!run) return null;
      if (SETTLED.has(run.status) || Date.now() >= deadline) return this.view();
      await this.nextChange(deadline - Date.now());
    }
  }

  /** Answers as soon as the run's version passes `known`, or it is settled, or on timeout. */
  async waitForChange(known: number, timeoutMs: number): Promise<RunView | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = this.loadRun();
      if (!run) return null;
      if (run.version > known || SETTLED.has(run.status) || Date.now() >= deadline) return this.view();
      await this.nextChange(deadline - Date.now());
    }
  }

  async pause(): Promise<RunActionResult> {
    const run = this.loadRun();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (run.status !== "running" && run.status !== "queued") return this.refuse(run, "cannot be paused: only a queued or running run can");
    // Nodes already executing finish and keep their result; no new node starts.
    this.setStatus("paused", null);
    await this.ctx.storage.deleteAlarm();
    await this.syncIndex();
    return { ok: true, run: this.view() };
  }

  async resume(): Promise<RunActionResult> {
    const run = this.loadRun();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (run.status !== "paused") return this.refuse(run, "is not paused");
    const states = this.loadStates();
    const graph = JSON.parse(run.graph) as PipelineGraph;
    const now = Date.now();
    // Resuming approves every approval node the run stopped at.
    for (const state of states.values()) {
      if (state.status !== "awaiting_approval") continue;
      const node = graph.nodes.find((n) => n.id === state.id) as NodeSpec;
      this.sql.exec(`UPDATE nodes SET status = 'completed', outputs = ?, finished_at = ? WHERE id = ?`, JSON.stringify(passThrough(node, { graph, states })), now, state.id);
    }
    this.setStatus("running", null);
    await this.ctx.storage.setAlarm(now);
    await this.syncIndex();
    return { ok: true, run: this.view() };
  }

  async terminate(): Promise<RunActionResult> {
    const run = this.loadRun();
    if (!run) return { ok: false, status: "missing", error: "run not found" };
    if (FINISHED.has(run.status)) return this.refuse(run, "cannot be terminated: only a queued, running or paused run can");
    this.finishRun("terminated", "terminated by request");
    await this.ctx.storage.deleteAlarm();
    await this.syncIndex();
    return { ok: true, run: this.view() };
  }

  /** Continues the run. Safe to run twice: a second alarm joins the drive in progress, or finds nothing to do. */
  override async alarm(): Promise<void> {
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
      if (this.loadRun()?.status === "running" || this.loadRun()?.status === "queued") await this.ctx.storage.setAlarm(Date.now() + LEASE_MS);
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
      console.error(JSON.stringify({ level: "error", where: "pipeline run", error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }));
      const run = this.loadRun();
      if (run && !FINISHED.has(run.status)) {
        this.finishRun("failed", "internal error while running the pipeline");
        await this.syncIndex();
      }
    }
    await this.armAlarm();
  }

  /** One planning pass: records skips, starts ready nodes, pauses at approvals, completes the run. True if anything changed. */
  private async step(): Promise<boolean> {
    const run = this.loadRun();
    if (!run) return false;
    if (run.status === "queued") {
      // The index counts queued and running alike (both are in progress), so it is not written here.
      this.sql.exec(`UPDATE run SET status = 'running', started_at = ?, version = version + 1`, Date.now());
      return true;
    }
    if (run.status !== "running") return false;
    const graph = JSON.parse(run.graph) as PipelineGraph;
    const states = this.loadStates();
    const now = Date.now();
    let changed = false;

    for (const state of states.values()) {
      if (state.status === "running" && !this.inflight.has(state.id)) {
        // Interrupted by a crash or eviction: it never finished, so it runs again.
        this.sql.exec(`UPDATE nodes SET status = 'pending' WHERE id = ?`, state.id);
        state.status = "pending";
        changed = true;
      }
      if (state.status === "sleeping" && (state.wakeAt ?? 0) <= now) {
        const node = graph.nodes.find((n) => n.id === state.id) as NodeSpec;
        this.completeNode(state, passThrough(node, { graph, states }), now);
        changed = true;
      }
    }

    const plan = planNodes(graph, states);
    for (const id of plan.skip) {
      this.sql.exec(`UPDATE nodes SET status = 'skipped', finished_at = ? WHERE id = ?`, now, id);
      (states.get(id) as NodeState).status = "skipped";
      changed = true;
    }

    const approvals = plan.ready.filter((id) => graph.nodes.find((n) => n.id === id)?.type === "approval");
    if (approvals.length > 0) {
      for (const id of approvals) this.sql.exec(`UPDATE nodes SET status = 'awaiting_approval', started_at = ? WHERE id = ?`, now, id);
      this.setStatus("paused", null);
      await this.syncIndex();
      return true;
    }

    for (const id of plan.ready) {
      const node = graph.nodes.find((n) => n.id === id) as NodeSpec;
      const state = states.get(id) as NodeState;
      if (node.type === "wait") {
        if (node.config.seconds <= 0) this.completeNode(state, passThrough(node, { graph, states }), now);
        else this.sql.exec(`UPDATE nodes SET status = 'sleeping', started_at = ?, wake_at = ? WHERE id = ?`, now, now + node.config.seconds * 1000, id);
        changed = true;
        continue;
      }
      const steps = (this.loadRun() as RunRow).steps;
      if (steps >= run.max_steps) {
        this.failRun(`run exceeded its limit of ${run.max_steps} steps (max_steps) before node ${id} could run`);
        await this.syncIndex();
        return true;
      }
      this.launch(node, state, run, graph, states);
      changed = true;
    }

    if (this.inflight.size === 0 && allDone(this.loadStates().values())) {
      this.finishRun("completed", null);
      await this.syncIndex();
      return true;
    }
    if (changed) this.bump();
    return changed;
  }

  private launch(node: NodeSpec, state: NodeState, run: RunRow, graph: PipelineGraph, states: Map<string, NodeState>): void {
    const now = Date.now();
    const childRunId = node.type === "pipeline" ? (state.childRunId ?? newId(now)) : null;
    this.sql.exec(`UPDATE run SET steps = steps + 1`);
    this.sql.exec(`UPDATE nodes SET status = 'running', started_at = ?, finished_at = NULL, attempts = attempts + 1, child_run_id = ? WHERE id = ?`, now, childRunId, node.id);
    const controller = new AbortController();
    const timeoutMs = node.config.timeout_seconds !== undefined ? node.config.timeout_seconds * 1000 : run.node_timeout_ms;
    const auth = JSON.parse(run.auth) as AuthContext;
    const inputs = JSON.parse(run.inputs) as Record<string, unknown>;
    const execution = executeNode(node, { auth, services: this.services, graph, states, inputs, runId: run.run_id, depth: run.depth, signal: controller.signal, childRunId });
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
    const run = this.loadRun();
    const state = this.loadStates().get(id);
    if (!run || !state || state.status !== "running") return;
    if (FINISHED.has(run.status)) {
      // A terminated or failed run keeps nothing a late node produced.
      this.sql.exec(`UPDATE nodes SET status = 'cancelled', finished_at = ? WHERE id = ?`, Date.now(), id);
      this.bump();
      return;
    }
    const size = JSON.stringify(outputs ?? {}).length;
    if (size > MAX_NODE_OUTPUT_BYTES) return this.onNodeFailed(id, new NodeFailure(`node ${id} produced ${size} bytes of output; the limit is ${MAX_NODE_OUTPUT_BYTES}`));
    // Paused runs keep the result: pausing stops new nodes, not finished work.
    this.completeNode(state, outputs ?? {}, Date.now());
    this.bump();
  }

  private async onNodeFailed(id: string, error: unknown): Promise<void> {
    const run = this.loadRun();
    if (!run) return;
    const now = Date.now();
    if (FINISHED.has(run.status)) {
      this.sql.exec(`UPDATE nodes SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'`, now, id);
      this.bump();
      return;
    }
    const message = messageOf(error);
    this.sql.exec(`UPDATE nodes SET status = 'failed', error = ?, finished_at = ? WHERE id = ?`, message, now, id);
    this.failRun(message.startsWith(`node ${id}`) ? message : `node ${id} failed: ${message}`);
    await this.syncIndex();
  }

  // ---- state ----------------------------------------------------------------------------

  private completeNode(state: NodeState, outputs: Record<string, unknown>, now: number): void {
    this.sql.exec(`UPDATE nodes SET status = 'completed', outputs = ?, error = NULL, finished_at = ? WHERE id = ?`, JSON.stringify(outputs), now, state.id);
    state.status = "completed";
    state.outputs = outputs;
  }

  private failRun(error: string): void {
    this.finishRun("failed", error);
  }

  /** Ends the run; nodes still executing are cancelled and their late results dropped. */
  private finishRun(status: "completed" | "failed" | "terminated", error: string | null): void {
    const now = Date.now();
    this.sql.exec(`UPDATE run SET status = ?, error = ?, finished_at = ?, version = version + 1`, status, error, now);
    if (status !== "completed") {
      this.sql.exec(`UPDATE nodes SET status = 'cancelled', finished_at = ? WHERE status IN ('running', 'sleeping', 'awaiting_approval')`, now);
      for (const { controller } of this.inflight.values()) controller.abort();
    }
    this.notify();
  }

  private setStatus(status: RunStatus, error: string | null): void {
    this.sql.exec(`UPDATE run SET status = ?, error = ?, version = version + 1`, status, error);
    this.notify();
  }

  private bump(): void {
    this.sql.exec(`UPDATE run SET version = version + 1`);
    this.notify();
  }

  private refuse(run: RunRow, why: string): RunActionResult {
    return { ok: false, status: run.status, error: `run ${run.run_id} is ${run.status} and ${why}` };
  }

  /** After a drive: sleep until the next wait node wakes, keep the lease while running, or clear the alarm. */
  private async armAlarm(): Promise<void> {
    const run = this.loadRun();
    if (!run) return;
    if (run.status === "running" || run.status === "queued") {
      const wakes = [...this.loadStates().values()].filter((s) => s.status === "sleeping").map((s) => s.wakeAt ?? 0);
      const lease: number = Date.now() + LEASE_MS;
      const next = wakes.length > 0 ? Math.min(...wakes) : lease;
      await this.ctx.storage.setAlarm(next);
    } else {
      await this.ctx.storage.deleteAlarm();
    }
  }

  /** Copies the run's status to the D1 run index (history, tenancy, concurrency limits). */
  private async syncIndex(): Promise<void> {
    const run = this.loadRun();
    if (!run) return;
    try {
      await database(this.env)
        .update(pipelineRuns)
        .set({ status: run.status, error: run.error, updatedAt: new Date().toISOString(), finishedAt: iso(run.finished_at) })
        .where(eq(pipelineRuns.id, run.run_id));
    } catch (error) {
      // The object stays the source of truth; the index catches up on the next change.
      console.error(JSON.stringify({ level: "error", where: "pipeline run index", runId: run.run_id, error: error instanceof Error ? error.message : String(error) }));
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

  private loadRun(): RunRow | null {
    const rows = this.sql.exec<Record<string, SqlStorageValue>>(`SELECT * FROM run WHERE singleton = 1`).toArray();
    return (rows[0] as unknown as RunRow | undefined) ?? null;
  }

  private loadStates(): Map<string, NodeState> {
    const rows = this.sql.exec<Record<string, SqlStorageValue>>(`SELECT * FROM nodes ORDER BY position`).toArray() as unknown as NodeRow[];
    return new Map(rows.map((row) => [row.id, toState(row)]));
  }

  private view(): RunView {
    const run = this.loadRun() as RunRow;
    const graph = JSON.parse(run.graph) as PipelineGraph;
    const states = this.loadStates();
    return {
      run_id: run.run_id,
      pipeline_id: run.pipeline_id,
      status: run.status,
      error: run.error,
      outputs: runOutputs(graph, states),
      nodes: [...states.values()].map((s) => ({
        id: s.id,
        type: s.type,
        status: s.status,
        outputs: s.outputs,
        error: s.error,
        started_at: iso(s.startedAt),
        finished_at: iso(s.finishedAt),
        duration_ms: s.startedAt !== null && s.finishedAt !== null ? s.finishedAt - s.startedAt : null,
        attempts: s.attempts,
      })),
      steps: run.steps,
      created_at: iso(run.created_at) as string,
      started_at: iso(run.started_at),
      finished_at: iso(run.finished_at),
      version: run.version,
    };
  }
}
