import type { SchemaMigration } from "./sqlite-schema";

/** AgentRunObject's SQLite schema (read and written by AgentRunStore), oldest step first (see sqlite-schema.ts). */
export const AGENT_RUN_SCHEMA: readonly SchemaMigration[] = [
  (sql) => {
    // IF NOT EXISTS: runs created before versioning already hold these tables.
    sql.exec(`CREATE TABLE IF NOT EXISTS run (id INTEGER PRIMARY KEY CHECK (id = 1), init TEXT NOT NULL, status TEXT NOT NULL, error TEXT, output TEXT,
      input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0, steps INTEGER NOT NULL DEFAULT 0, tool_errors INTEGER NOT NULL DEFAULT 0,
      active_ms INTEGER NOT NULL DEFAULT 0, resumed_at INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 0, index_pending INTEGER NOT NULL DEFAULT 0)`);
    sql.exec("CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT NOT NULL)");
    sql.exec(
      "CREATE TABLE IF NOT EXISTS results (call_id TEXT PRIMARY KEY, content TEXT NOT NULL, is_error INTEGER NOT NULL)",
    );
    sql.exec("CREATE TABLE IF NOT EXISTS decisions (call_id TEXT PRIMARY KEY, kind TEXT NOT NULL, answer TEXT)");
  },
];
