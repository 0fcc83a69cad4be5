-- Pipelines change in place through POST /v1/update/pipeline/{id}: each update bumps `version`
-- (runs already started keep the definition they copied into their run object). `branch_id` is
-- the pipeline's one branch, answered as `branch_id` / `mainBranch` to the editor's clients.
-- `editor` holds the definition as the editor format sent it (NULL for Loom's own format), so a
-- fetch answers it back in that shape.
ALTER TABLE pipelines ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE pipelines ADD COLUMN branch_id TEXT;
ALTER TABLE pipelines ADD COLUMN editor TEXT;
UPDATE pipelines SET branch_id = lower(hex(randomblob(12))) WHERE branch_id IS NULL;
