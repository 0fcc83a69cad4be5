-- Agents that run (issue 17): the runnable definition of an agent (instructions, model
-- reference, tools, inputs, outputs, limits) as validated JSON, share roles (viewer / editor),
-- and an index of runs for history, run lists and tenancy checks (each run lives in an
-- AgentRunObject Durable Object; this table mirrors its status).
ALTER TABLE agents ADD COLUMN definition TEXT;
ALTER TABLE agents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
-- The definition as it was when published: what importers copy, whatever the owner edits later.
ALTER TABLE agents ADD COLUMN published_definition TEXT;
ALTER TABLE agent_shares ADD COLUMN role TEXT NOT NULL DEFAULT 'viewer';
ALTER TABLE agent_history ADD COLUMN run_id TEXT;

CREATE TABLE agent_runs (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL,
  org_id TEXT NOT NULL,
  started_by TEXT NOT NULL,
  parent_run_id TEXT,
  status TEXT NOT NULL,
  error TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT
);
CREATE INDEX agent_runs_agent ON agent_runs(agent_id, created_at);
CREATE INDEX agent_runs_org ON agent_runs(org_id, status);
