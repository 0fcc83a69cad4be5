-- Transformations: user functions (Python or JavaScript) run in the wasm sandbox.
CREATE TABLE transformations (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  owner_id TEXT NOT NULL REFERENCES users(id),
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  function_name TEXT NOT NULL,
  source TEXT NOT NULL,
  language TEXT NOT NULL CHECK (language IN ('python', 'javascript')),
  input_schema TEXT NOT NULL,
  output_schema TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX transformations_owner_name ON transformations(owner_id, name);
CREATE INDEX transformations_org ON transformations(org_id);
