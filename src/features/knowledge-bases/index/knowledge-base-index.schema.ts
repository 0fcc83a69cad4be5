import type { SchemaMigration } from "../../../durable-objects/sqlite-schema";
import { createContentHashes } from "./content-hashes";

/**
 * KnowledgeBaseIndex's SQLite schema, oldest step first (see sqlite-schema.ts): chunks and their
 * FTS5 index, packed vectors and keyword caches, pending ingestion steps, and web sources.
 */
export const KNOWLEDGE_BASE_INDEX_SCHEMA: readonly SchemaMigration[] = [
  (sql) => {
    sql.exec(`
      CREATE TABLE IF NOT EXISTS items (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, document_id TEXT, position INTEGER NOT NULL DEFAULT 0, text TEXT, metadata TEXT NOT NULL DEFAULT '{}');
      CREATE INDEX IF NOT EXISTS items_document ON items(document_id);
      CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(text, tokenize = 'porter unicode61');
      CREATE VIRTUAL TABLE IF NOT EXISTS items_terms USING fts5vocab(items_fts, instance);
      CREATE VIRTUAL TABLE IF NOT EXISTS scratch_fts USING fts5(text, tokenize = 'porter unicode61');
      CREATE VIRTUAL TABLE IF NOT EXISTS scratch_words USING fts5vocab(scratch_fts, instance);
      CREATE TABLE IF NOT EXISTS vector_blocks (block INTEGER PRIMARY KEY, count INTEGER NOT NULL, rowids BLOB NOT NULL, scales BLOB NOT NULL, data BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS length_blocks (block INTEGER PRIMARY KEY, data BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS postings_cache (term TEXT PRIMARY KEY, rows BLOB NOT NULL, tfs BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS pending (document_id TEXT NOT NULL, position INTEGER NOT NULL, kb_id TEXT NOT NULL, model TEXT NOT NULL, chunk TEXT NOT NULL, PRIMARY KEY (document_id, position));
      CREATE TABLE IF NOT EXISTS replacements (document_id TEXT PRIMARY KEY, replaces TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS web_sources (id TEXT PRIMARY KEY, record TEXT NOT NULL, crawling INTEGER NOT NULL, next_at INTEGER);
      CREATE TABLE IF NOT EXISTS web_source_pages (source_id TEXT NOT NULL, position INTEGER NOT NULL, page TEXT NOT NULL, PRIMARY KEY (source_id, position));
    `);
  },
  (sql) => {
    // Token counts for keyword scoring. Objects made before versioning may already have the column.
    const columns = sql.exec<{ name: string }>("PRAGMA table_info(items)").toArray();
    if (!columns.some((c) => c.name === "tokens")) sql.exec("ALTER TABLE items ADD COLUMN tokens INTEGER");
  },
  (sql) => {
    // Small documents written in one batch (small-document-writer.ts): each document's D1 row and
    // audit entry kept with its chunks until D1 has them.
    sql.exec(`
      CREATE TABLE IF NOT EXISTS finished (document_id TEXT PRIMARY KEY, outcome TEXT, row TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS pending_audits (document_id TEXT PRIMARY KEY, audit TEXT NOT NULL);
    `);
  },
  (sql) => {
    // Small documents' originals, kept beside their chunks instead of one R2 object each (issue 14).
    sql.exec("CREATE TABLE IF NOT EXISTS originals (document_id TEXT PRIMARY KEY, bytes BLOB NOT NULL)");
  },
  (sql) => {
    // Sharding (shard-splitter.ts): this shard's place, the map (shard 0), and a split's documents left to copy.
    sql.exec(`
      CREATE TABLE IF NOT EXISTS shard_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS split_documents (document_id TEXT PRIMARY KEY);
    `);
  },
  // Content hashes for de-duplication answered by the object (content-hashes.ts, issue 14).
  createContentHashes,
];
