-- AI summaries of knowledge-base documents (generate_ai_doc_summaries), cached per document and model.
-- content_hash ties a summary to the document's content: a changed document gets a fresh summary.
CREATE TABLE kb_document_summaries (
  document_id TEXT NOT NULL,
  model TEXT NOT NULL,
  org_id TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  summary TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (document_id, model)
);
CREATE INDEX kb_document_summaries_org ON kb_document_summaries (org_id);
