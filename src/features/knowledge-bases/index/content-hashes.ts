/**
 * The content hashes of the documents an index object holds (issue 14): lets shard 0 of a
 * knowledge base that never split answer the index route's de-duplication itself, inside the
 * batch that writes the documents, instead of the Worker asking D1 first (a D1 call per request).
 *
 * The object answers only while it can vouch that the table lists every document the base holds
 * that D1 would match (any status but `failed`): `complete` is set when the table is created on
 * an object holding nothing, kept by every path that adds or removes documents here, and dropped
 * for good by any path that adds chunks without a hash (documents indexed in steps, web pages,
 * outside sources, copies from a split or a primary). Without it the Worker asks D1 as before.
 */
export class ContentHashes {
  private completeCache: boolean | undefined;

  constructor(private readonly sql: SqlStorage) {}

  /** Whether every document held here is listed (meta `content_hashes`, set by the schema step). */
  complete(): boolean {
    this.completeCache ??=
      this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'content_hashes'").toArray()[0]?.value ===
      "complete";
    return this.completeCache;
  }

  /** Some document arrived without its hash: from now on D1 answers de-duplication for this base. */
  markIncomplete(): void {
    if (this.completeCache === false) return;
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('content_hashes', 'incomplete')");
    this.completeCache = false;
  }

  /** The id of a document held here with this content hash, if any. */
  documentWith(hash: string): string | undefined {
    return this.sql
      .exec<{ document_id: string }>("SELECT document_id FROM content_hashes WHERE hash = ? LIMIT 1", hash)
      .toArray()[0]?.document_id;
  }

  /** Inside the transaction that makes the documents searchable: one statement for all of them. */
  addAll(entries: { documentId: string; hash: string }[]): void {
    if (entries.length === 0) return;
    this.sql.exec(
      "INSERT OR REPLACE INTO content_hashes (document_id, hash) SELECT value ->> 0, value ->> 1 FROM json_each(?)",
      JSON.stringify(entries.map((e) => [e.documentId, e.hash])),
    );
  }

  /** Inside the transaction that removes the documents' chunks (deleted, replaced or moved to another shard). */
  remove(documentIds: string[]): void {
    for (const id of documentIds) this.sql.exec("DELETE FROM content_hashes WHERE document_id = ?", id);
  }

  /** After deleteAll: the schema step decides again. */
  forget(): void {
    this.completeCache = undefined;
  }
}

/** The schema step: the table, complete only when the object holds nothing yet. */
export function createContentHashes(sql: SqlStorage): void {
  sql.exec(`
    CREATE TABLE IF NOT EXISTS content_hashes (document_id TEXT PRIMARY KEY, hash TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS content_hashes_hash ON content_hashes(hash);
  `);
  const held = sql
    .exec<{ n: number }>(
      "SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending) + (SELECT count(*) FROM finished) AS n",
    )
    .one().n;
  sql.exec(
    "INSERT OR REPLACE INTO meta (key, value) VALUES ('content_hashes', ?)",
    held === 0 ? "complete" : "incomplete",
  );
}
