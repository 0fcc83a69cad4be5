-- Each run knows the run tree it belongs to, so sub-pipeline fan-out can be bounded: the root
-- run's id (its own id for a root), the parent run (NULL for a root) and its depth (root 0).
-- Runs indexed before this migration become their own roots.
ALTER TABLE pipeline_runs ADD COLUMN root_run_id TEXT;
ALTER TABLE pipeline_runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE pipeline_runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
UPDATE pipeline_runs SET root_run_id = id WHERE root_run_id IS NULL;
CREATE INDEX pipeline_runs_root ON pipeline_runs(root_run_id);
