import { primaryKey, sqliteTable, text, index } from "drizzle-orm/sqlite-core";

/** AI summaries of knowledge-base documents, cached per (document, model) and tied to the content hash. */
export const documentSummaries = sqliteTable(
  "kb_document_summaries",
  {
    documentId: text("document_id").notNull(),
    model: text("model").notNull(),
    orgId: text("org_id").notNull(),
    contentHash: text("content_hash").notNull(),
    summary: text("summary").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.documentId, t.model] }), index("kb_document_summaries_org").on(t.orgId)],
);
