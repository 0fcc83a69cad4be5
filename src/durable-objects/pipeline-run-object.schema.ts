import type { SchemaMigration } from "./sqlite-schema";

/** PipelineRunObject's SQLite schema (read and written by RunStore), oldest step first (see sqlite-schema.ts). */
export const PIPELINE_RUN_SCHEMA: readonly SchemaMigration[] = [
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS run (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1), run_id TEXT NOT NULL, pipeline_id TEXT NOT NULL, auth TEXT NOT NULL,
      graph TEXT NOT NULL, inputs TEXT NOT NULL, status TEXT NOT NULL, error TEXT, steps INTEGER NOT NULL DEFAULT 0,
      max_steps INTEGER NOT NULL, node_timeout_ms INTEGER NOT NULL, depth INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS nodes (
      id TEXT PRIMARY KEY, position INTEGER NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, outputs TEXT, error TEXT,
      started_at INTEGER, finished_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0, wake_at INTEGER, child_run_id TEXT)`);
  },
  (sql) => {
    // Whether the D1 run index missed the run's last change. IF NOT EXISTS: objects made before
    // versioning already have it.
    sql.exec(
      `CREATE TABLE IF NOT EXISTS index_sync (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), pending INTEGER NOT NULL)`,
    );
  },
];
