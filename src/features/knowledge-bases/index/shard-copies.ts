import { wordCount, type KeywordScorer } from "./keyword-scorer";
import type { CopiedChunk } from "./shard-splitter";
import type { VectorStore } from "./vector-store";

/**
 * A split's copy of chunks from one shard to another, exact: the row as stored, its token count,
 * its rowid (kept when free, so ties keep one index's order), and its vector. A vector is read
 * dequantised (int8 x scale) and quantised again on write, which gives back the same int8 values
 * and the same scale, so every score is the same in the new shard.
 */
export function readCopies(sql: SqlStorage, vectors: VectorStore, documentIds: string[]): CopiedChunk[] {
  const out: CopiedChunk[] = [];
  for (const documentId of documentIds)
    for (const r of sql.exec<{
      rowid: number;
      id: string;
      document_id: string;
      position: number;
      text: string | null;
      metadata: string;
      tokens: number | null;
    }>("SELECT rowid, id, document_id, position, text, metadata, tokens FROM items WHERE document_id = ?", documentId))
      out.push({
        rowid: r.rowid,
        id: r.id,
        documentId: r.document_id,
        position: r.position,
        text: r.text,
        metadata: r.metadata,
        tokens: r.tokens,
        values: vectors.valuesOf(r.rowid),
      });
  return out;
}

/** Writes copied chunks (inside the caller's transaction, after their documents' old rows are gone). */
export function writeCopies(
  sql: SqlStorage,
  keywords: KeywordScorer,
  vectors: VectorStore,
  chunks: CopiedChunk[],
): void {
  keywords.invalidate();
  const lengths: { rowid: number; tokens: number | null }[] = [];
  const values: { rowid: number; values: number[] }[] = [];
  for (const c of chunks) {
    const free = sql.exec("SELECT 1 FROM items WHERE rowid = ?", c.rowid).toArray().length === 0;
    const rowid = sql
      .exec<{ rowid: number }>(
        "INSERT INTO items (rowid, id, document_id, position, text, metadata, tokens) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING rowid",
        free ? c.rowid : null,
        c.id,
        c.documentId,
        c.position,
        c.text,
        c.metadata,
        c.tokens,
      )
      .one().rowid;
    if (c.text) sql.exec("INSERT INTO items_fts (rowid, text) VALUES (?, ?)", rowid, c.text);
    lengths.push({ rowid, tokens: c.text ? (c.tokens ?? wordCount(c.text)) : null });
    if (c.values) values.push({ rowid, values: c.values });
  }
  keywords.recordLengths(lengths);
  vectors.write(values);
}
