/** Originals per INSERT: two bound parameters each, under SQLite's 100 per statement. */
const ORIGINALS_PER_STATEMENT = 40;

/**
 * Inside a transaction: keeps small documents' originals beside their chunks (the `originals`
 * table), a few dozen rows per statement rather than one statement each: a batch's statements are
 * a fixed cost of its transaction (each is prepared anew), paid per group instead of per document.
 */
export function storeOriginals(sql: SqlStorage, originals: { documentId: string; bytes: Uint8Array }[]): void {
  for (let at = 0; at < originals.length; at += ORIGINALS_PER_STATEMENT) {
    const slice = originals.slice(at, at + ORIGINALS_PER_STATEMENT);
    sql.exec(
      `INSERT OR REPLACE INTO originals (document_id, bytes) VALUES ${slice.map(() => "(?, ?)").join(", ")}`,
      ...slice.flatMap((o) => [o.documentId, o.bytes]),
    );
  }
}
