-- Agents: owned by a user, shared with users of the same organization, published to a
-- marketplace every signed-in user can browse, favorited, imported (copied) and duplicated.
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  owner_id TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  pipeline_id TEXT,
  config TEXT NOT NULL DEFAULT '{}',
  tags TEXT NOT NULL DEFAULT '[]',
  source_agent_id TEXT,
  published INTEGER NOT NULL DEFAULT 0,
  published_at TEXT,
  category TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX agents_owner_name ON agents(owner_id, name);
CREATE INDEX agents_org ON agents(org_id);
CREATE INDEX agents_published ON agents(published, published_at);

CREATE TABLE agent_shares (
  agent_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  shared_by TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (agent_id, user_id)
);
CREATE INDEX agent_shares_user ON agent_shares(user_id);

CREATE TABLE agent_favorites (
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (user_id, agent_id)
);

CREATE TABLE agent_history (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  action TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX agent_history_user ON agent_history(user_id, created_at);
