-- Pipeline definitions and the run index (each run's full state lives in its PipelineRunObject).
CREATE TABLE pipelines (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  owner_id TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  nodes TEXT NOT NULL,
  edges TEXT NOT NULL,
  settings TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX pipelines_owner_name ON pipelines(org_id, owner_id, name);
CREATE INDEX pipelines_org ON pipelines(org_id);

CREATE TABLE pipeline_runs (
  id TEXT PRIMARY KEY,
  pipeline_id TEXT NOT NULL,
  org_id TEXT NOT NULL,
  started_by TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'completed', 'failed', 'terminated')),
  error TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  finished_at TEXT
);
CREATE INDEX pipeline_runs_pipeline_time ON pipeline_runs(pipeline_id, created_at);
CREATE INDEX pipeline_runs_org_status ON pipeline_runs(org_id, status);
