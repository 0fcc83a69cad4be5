import { sqliteTable, text, integer, index, uniqueIndex } from "drizzle-orm/sqlite-core";

export const knowledgeBases = sqliteTable(
  "knowledge_bases",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    chunkSize: integer("chunk_size").notNull(),
    chunkOverlap: integer("chunk_overlap").notNull(),
    fileProcessingImplementation: text("file_processing_implementation").notNull().default("Default"),
    analyzeDocuments: integer("analyze_documents", { mode: "boolean" }).notNull().default(false),
    isHybrid: integer("is_hybrid", { mode: "boolean" }).notNull().default(true),
    embeddingModel: text("embedding_model").notNull(),
    embeddingDimensions: integer("embedding_dimensions").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("knowledge_bases_owner_name").on(t.orgId, t.ownerId, t.name),
    index("knowledge_bases_org").on(t.orgId),
  ],
);

export const kbDocuments = sqliteTable(
  "kb_documents",
  {
    id: text("id").primaryKey(),
    kbId: text("kb_id").notNull(),
    orgId: text("org_id").notNull(),
    name: text("name").notNull(),
    path: text("path"),
    mimeType: text("mime_type").notNull(),
    source: text("source").notNull(),
    size: integer("size").notNull().default(0),
    contentHash: text("content_hash").notNull(),
    r2Key: text("r2_key"),
    /** JSON object given by the caller at indexing. */
    customMetadata: text("custom_metadata", { mode: "json" }).$type<Record<string, unknown>>().notNull().default({}),
    status: text("status", { enum: ["indexing", "ready", "failed"] }).notNull(),
    error: text("error"),
    chunkCount: integer("chunk_count").notNull().default(0),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("kb_documents_kb").on(t.kbId, t.createdAt), index("kb_documents_hash").on(t.kbId, t.contentHash)],
);

export type KnowledgeBaseRow = typeof knowledgeBases.$inferSelect;
export type KbDocumentRow = typeof kbDocuments.$inferSelect;
