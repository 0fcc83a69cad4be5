-- Knowledge bases and their documents' records. Chunks, the keyword index and the vectors live in
-- each knowledge base's Durable Object (KnowledgeBaseIndex), not here.
CREATE TABLE knowledge_bases (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES organizations(id),
  owner_id TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  chunk_size INTEGER NOT NULL,
  chunk_overlap INTEGER NOT NULL,
  file_processing_implementation TEXT NOT NULL DEFAULT 'Default',
  analyze_documents INTEGER NOT NULL DEFAULT 0,
  is_hybrid INTEGER NOT NULL DEFAULT 1,
  embedding_model TEXT NOT NULL,
  embedding_dimensions INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX knowledge_bases_owner_name ON knowledge_bases(org_id, owner_id, name);
CREATE INDEX knowledge_bases_org ON knowledge_bases(org_id);

CREATE TABLE kb_documents (
  id TEXT PRIMARY KEY,
  kb_id TEXT NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
  org_id TEXT NOT NULL,
  name TEXT NOT NULL,
  path TEXT,
  mime_type TEXT NOT NULL,
  source TEXT NOT NULL,
  size INTEGER NOT NULL DEFAULT 0,
  content_hash TEXT NOT NULL,
  r2_key TEXT,
  custom_metadata TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL CHECK (status IN ('indexing', 'ready', 'failed')),
  error TEXT,
  chunk_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX kb_documents_kb ON kb_documents(kb_id, created_at);
CREATE INDEX kb_documents_hash ON kb_documents(kb_id, content_hash);
