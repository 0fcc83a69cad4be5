import { wordCount } from "./chunk-lengths";
import type { ItemInput } from "./small-document-writer";

/** What writeItemRows wrote, in the items' order: each item's rowid, word count and vector. */
export interface ItemRows {
  rowids: number[];
  lengths: { rowid: number; tokens: number | null }[];
  vectors: { rowid: number; values: ArrayLike<number> }[];
}

/**
 * Inside the caller's transaction: writes items' rows and keyword rows (FTS5). A few statements
 * per call however many items it holds (json_each), rather than two or three per item: with
 * small documents the per-statement cost was a good part of a batch's transaction (issue 14).
 */
export function writeItemRows(sql: SqlStorage, items: ItemInput[]): ItemRows {
  const rowids: number[] = [];
  const lengths: { rowid: number; tokens: number | null }[] = [];
  const vectors: { rowid: number; values: ArrayLike<number> }[] = [];
  // Which ids are held already, in one statement for the whole call rather than one per item.
  const held = new Map(
    sql
      .exec<{ id: string; rowid: number }>(
        "SELECT id, rowid FROM items WHERE id IN (SELECT value FROM json_each(?))",
        JSON.stringify(items.map((i) => i.id)),
      )
      .toArray()
      .map((r) => [r.id, r.rowid]),
  );
  // New ids (first occurrence in the call) go in with one statement; ids held already, or repeated
  // in the call, are updated one by one after it, in order, so the last occurrence wins as before.
  const tokens = items.map((item) => (item.text ? wordCount(item.text) : null));
  const fresh: number[] = [];
  const later: number[] = [];
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (held.has(item.id) || seen.has(item.id)) later.push(i);
    else fresh.push(i);
    seen.add(item.id);
  });
  if (fresh.length > 0) {
    sql.exec(
      "INSERT INTO items (id, document_id, position, text, metadata, tokens) SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5 FROM json_each(?)",
      JSON.stringify(
        fresh.map((i) => {
          const item = items[i];
          return [item.id, item.documentId, item.position, item.text, JSON.stringify(item.metadata), tokens[i]];
        }),
      ),
    );
    for (const r of sql
      .exec<{ id: string; rowid: number }>(
        "SELECT id, rowid FROM items WHERE id IN (SELECT value FROM json_each(?))",
        JSON.stringify(fresh.map((i) => items[i].id)),
      )
      .toArray())
      held.set(r.id, r.rowid);
  }
  for (const i of later) {
    const item = items[i];
    const rowid = held.get(item.id) as number;
    sql.exec(
      "UPDATE items SET document_id = ?, position = ?, text = ?, metadata = ?, tokens = ? WHERE rowid = ?",
      item.documentId,
      item.position,
      item.text,
      JSON.stringify(item.metadata),
      tokens[i],
      rowid,
    );
    sql.exec("DELETE FROM items_fts WHERE rowid = ?", rowid);
  }
  // Keyword rows go in with one statement too; by rowid, so a repeated id keeps its last text.
  const keywordRows = new Map<number, string>();
  items.forEach((item, i) => {
    const rowid = held.get(item.id) as number;
    if (item.text) keywordRows.set(rowid, item.text);
    else keywordRows.delete(rowid);
    lengths.push({ rowid, tokens: tokens[i] });
    if (item.values) vectors.push({ rowid, values: item.values });
    rowids.push(rowid);
  });
  if (keywordRows.size > 0)
    sql.exec(
      "INSERT INTO items_fts (rowid, text) SELECT value ->> 0, value ->> 1 FROM json_each(?)",
      JSON.stringify([...keywordRows]),
    );
  return { rowids, lengths, vectors };
}
