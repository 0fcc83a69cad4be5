import type { AuthContext } from "../../env";
import type { RunStatus } from "../../db/schema/pipelines";
import type { PipelineGraph } from "./pipeline-graph";
import type { NodeSpec } from "./pipeline-nodes";
import { runOutputs, type NodeState, type NodeStatus } from "./run-state";

/** What the run service hands a new run. The graph is copied in, so deleting the pipeline cannot change a run. */
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

/** The run row, with its JSON columns parsed. */
export interface RunRecord {
  runId: string;
  pipelineId: string;
  auth: AuthContext;
  graph: PipelineGraph;
  inputs: Record<string, unknown>;
  status: RunStatus;
  error: string | null;
  steps: number;
  maxSteps: number;
  nodeTimeoutMs: number;
  depth: number;
  version: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
}

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

export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * A run's persistence inside its Durable Object's SQLite: one run row and one row per node.
 * Every write is a single statement, so each is atomic on its own; the run object orders them
 * so that a node's start is recorded before it executes and its result right after.
 */
export class RunStore {
  /** The definition never changes during a run; parsed once per object instance. */
  private graphCache: { json: string; graph: PipelineGraph } | null = null;

  /** The tables come from PIPELINE_RUN_SCHEMA, which the run object applies before any call. */
  constructor(private readonly sql: SqlStorage) {}

  /** Whether the D1 run index missed the run's last change (it is retried by alarm until it lands). */
  indexPending(): boolean {
    return (
      this.sql.exec<{ pending: number }>(`SELECT pending FROM index_sync WHERE singleton = 1`).toArray()[0]?.pending ===
      1
    );
  }

  setIndexPending(pending: boolean): void {
    this.sql.exec(
      `INSERT INTO index_sync (singleton, pending) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET pending = excluded.pending`,
      pending ? 1 : 0,
    );
  }

  create(init: RunInit, now: number): void {
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
      this.sql.exec(
        `INSERT INTO nodes (id, position, type, status) VALUES (?, ?, ?, 'pending')`,
        id,
        position,
        node.type,
      );
    });
  }

  run(): RunRecord | null {
    const row = this.sql
      .exec<Record<string, SqlStorageValue>>(`SELECT * FROM run WHERE singleton = 1`)
      .toArray()[0] as unknown as RunRow | undefined;
    if (!row) return null;
    if (this.graphCache?.json !== row.graph)
      this.graphCache = { json: row.graph, graph: JSON.parse(row.graph) as PipelineGraph };
    return {
      runId: row.run_id,
      pipelineId: row.pipeline_id,
      auth: JSON.parse(row.auth) as AuthContext,
      graph: this.graphCache.graph,
      inputs: JSON.parse(row.inputs) as Record<string, unknown>,
      status: row.status,
      error: row.error,
      steps: row.steps,
      maxSteps: row.max_steps,
      nodeTimeoutMs: row.node_timeout_ms,
      depth: row.depth,
      version: row.version,
      createdAt: row.created_at,
      startedAt: row.started_at,
      finishedAt: row.finished_at,
    };
  }

  nodes(): Map<string, NodeState> {
    const rows = this.sql
      .exec<Record<string, SqlStorageValue>>(`SELECT * FROM nodes ORDER BY position`)
      .toArray() as unknown as NodeRow[];
    return new Map(
      rows.map((row) => [
        row.id,
        {
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
        },
      ]),
    );
  }

  // ---- run row --------------------------------------------------------------------------

  markStarted(now: number): void {
    this.sql.exec(`UPDATE run SET status = 'running', started_at = ?, version = version + 1`, now);
  }

  setStatus(status: RunStatus, error: string | null): void {
    this.sql.exec(`UPDATE run SET status = ?, error = ?, version = version + 1`, status, error);
  }

  /** Ends the run; unless it completed, unfinished node work is marked cancelled. */
  finish(status: "completed" | "failed" | "terminated", error: string | null, now: number): void {
    this.sql.exec(`UPDATE run SET status = ?, error = ?, finished_at = ?, version = version + 1`, status, error, now);
    if (status !== "completed")
      this.sql.exec(
        `UPDATE nodes SET status = 'cancelled', finished_at = ? WHERE status IN ('running', 'sleeping', 'awaiting_approval')`,
        now,
      );
  }

  bump(): void {
    this.sql.exec(`UPDATE run SET version = version + 1`);
  }

  // ---- node rows ------------------------------------------------------------------------

  /** Recorded before the node executes: a crash after this line finds the node `running` and knows it was interrupted. */
  markRunning(id: string, childRunId: string | null, now: number): void {
    this.sql.exec(`UPDATE run SET steps = steps + 1`);
    this.sql.exec(
      `UPDATE nodes SET status = 'running', started_at = ?, finished_at = NULL, attempts = attempts + 1, child_run_id = ? WHERE id = ?`,
      now,
      childRunId,
      id,
    );
  }

  markPending(id: string): void {
    this.sql.exec(`UPDATE nodes SET status = 'pending' WHERE id = ?`, id);
  }

  markCompleted(id: string, outputs: Record<string, unknown>, now: number): void {
    this.sql.exec(
      `UPDATE nodes SET status = 'completed', outputs = ?, error = NULL, finished_at = ? WHERE id = ?`,
      JSON.stringify(outputs),
      now,
      id,
    );
  }

  markSkipped(id: string, now: number): void {
    this.sql.exec(`UPDATE nodes SET status = 'skipped', finished_at = ? WHERE id = ?`, now, id);
  }

  markFailed(id: string, error: string, now: number): void {
    this.sql.exec(`UPDATE nodes SET status = 'failed', error = ?, finished_at = ? WHERE id = ?`, error, now, id);
  }

  markCancelled(id: string, now: number): void {
    this.sql.exec(
      `UPDATE nodes SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'`,
      now,
      id,
    );
  }

  markAwaitingApproval(id: string, now: number): void {
    this.sql.exec(`UPDATE nodes SET status = 'awaiting_approval', started_at = ? WHERE id = ?`, now, id);
  }

  markSleeping(id: string, now: number, wakeAt: number): void {
    this.sql.exec(`UPDATE nodes SET status = 'sleeping', started_at = ?, wake_at = ? WHERE id = ?`, now, wakeAt, id);
  }

  // ---- reading --------------------------------------------------------------------------

  view(): RunView | null {
    const run = this.run();
    if (!run) return null;
    const states = this.nodes();
    return {
      run_id: run.runId,
      pipeline_id: run.pipelineId,
      status: run.status,
      error: run.error,
      outputs: runOutputs(run.graph, states),
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
      created_at: iso(run.createdAt) as string,
      started_at: iso(run.startedAt),
      finished_at: iso(run.finishedAt),
      version: run.version,
    };
  }
}
