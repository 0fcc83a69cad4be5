-- Chatbots, their deployment settings, the conversation index, visitor rate limits and webhook replay guards.
-- Messages live in each conversation's ConversationObject; D1 keeps only what is listed and joined.
CREATE TABLE chatbots (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  owner_id TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  -- Answering: a pipeline (id, input and output names) or built-in answering (model, prompt, knowledge bases).
  pipeline_id TEXT,
  pipeline_input TEXT,
  pipeline_output TEXT,
  knowledge_base_ids TEXT NOT NULL DEFAULT '[]',
  query_options TEXT NOT NULL DEFAULT '{}',
  system_prompt TEXT NOT NULL DEFAULT '',
  model TEXT,
  follow_up_questions INTEGER NOT NULL DEFAULT 0,
  browser_extension INTEGER NOT NULL DEFAULT 0,
  deployed INTEGER NOT NULL DEFAULT 0,
  deployed_at TEXT,
  -- JSON: display name, greeting, colours, avatar, suggested questions, show_sources.
  deployment TEXT NOT NULL DEFAULT '{}',
  -- JSON: mode (public | password | members), allowed origins, rate limit; the password only as a hash.
  access TEXT NOT NULL DEFAULT '{}',
  -- JSON: editor/runner user ids and roles.
  rbac TEXT NOT NULL DEFAULT '{}',
  -- JSON of non-secret settings; secrets sealed with AES-GCM in the *_sealed columns.
  telephony TEXT NOT NULL DEFAULT '{}',
  telephony_token_sealed TEXT,
  chatworkspace TEXT NOT NULL DEFAULT '{}',
  chatworkspace_signing_sealed TEXT,
  chatworkspace_token_sealed TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX chatbots_owner_name ON chatbots(org_id, owner_id, name);
CREATE INDEX chatbots_org ON chatbots(org_id);

CREATE TABLE chatbot_conversations (
  id TEXT PRIMARY KEY,
  chatbot_id TEXT NOT NULL REFERENCES chatbots(id) ON DELETE CASCADE,
  org_id TEXT NOT NULL,
  -- Exactly one of owner_id (a signed-in user), visitor_id (a signed visitor session) or channel_key (telephony / chat workspace).
  owner_id TEXT,
  visitor_id TEXT,
  channel TEXT NOT NULL DEFAULT 'api',
  channel_key TEXT,
  name TEXT NOT NULL,
  message_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX chatbot_conversations_owner ON chatbot_conversations(org_id, owner_id, updated_at);
CREATE INDEX chatbot_conversations_visitor ON chatbot_conversations(chatbot_id, visitor_id, updated_at);
CREATE UNIQUE INDEX chatbot_conversations_channel ON chatbot_conversations(chatbot_id, channel_key);

-- Fixed-window counters for the public surface, updated in one atomic upsert per request.
CREATE TABLE chatbot_rate_limits (
  key TEXT PRIMARY KEY,
  window_start INTEGER NOT NULL,
  count INTEGER NOT NULL
);

-- Signatures / event ids already processed by the inbound webhooks, so a replay is refused.
CREATE TABLE chatbot_webhook_replays (
  key TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL
);
