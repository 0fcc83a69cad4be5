import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { filterToSql, matchesFilter, type FilterNode } from "../features/knowledge-bases/metadata-filter";
import { nearest, signBits, dotInt8 } from "../features/knowledge-bases/vector-kernels";
import { quantize, TopK, MAX_TOP_K, type IndexVector, type VectorMatch, type VectorMetadata } from "../features/knowledge-bases/vector-index";
import { matchExpression, queryTerms, selectTerms } from "../features/knowledge-bases/keyword-query";
import { vectorIndexFor } from "../features/knowledge-bases/vector-backend";
import { resolveEmbedder } from "../features/knowledge-bases/embedders";
import { markDocumentIndexed } from "../features/knowledge-bases/documents.repository";

/** Vectors per stored row: one row of 512 x 512-d int8 vectors is ~256 KB, under the 2 MB row cap. */
const BLOCK = 512;
/** Chunks embedded per step; a step keeps well inside one request's CPU budget. */
const STEP_CHUNKS = 1000;

export interface ChunkInput {
  id: string;
  documentId: string;
  position: number;
  text: string;
  metadata: VectorMetadata;
}

export interface IngestJob {
  kbId: string;
  documentId: string;
  embeddingModel: string;
  chunks: ChunkInput[];
}

export interface StoredChunk {
  id: string;
  documentId: string;
  position: number;
  text: string;
  metadata: VectorMetadata;
}

export interface KeywordHit {
  id: string;
  score: number;
}

/** Words as FTS5's unicode61 tokenizer counts them: the document length BM25 normalises by. */
function wordCount(text: string): number {
  let n = 0;
  for (const _ of text.matchAll(/[\p{L}\p{N}]+/gu)) n++;
  return n;
}

/** BM25 constants, as FTS5's bm25() uses them. */
const BM25_K1 = 1.2;
const BM25_B = 0.75;
/** Cached posting entries above which the cache starts over (memory bound, ~10 bytes each). */
const MAX_CACHED_POSTINGS = 4_000_000;

class Rollback extends Error {}

/** Sent back instead of throwing, since a thrown error loses its code across RPC. */
export type IngestResult = { status: "ready"; chunks: number } | { status: "indexing"; remaining: number } | { status: "failed"; error: string };

/**
 * One per knowledge base. Its SQLite holds the chunks (text, document id, metadata JSON), an FTS5
 * keyword index over them, and the vectors quantised to int8, packed BLOCK per row, so that after an
 * eviction the whole set reloads in a few reads. Vectors are kept in memory once loaded.
 * Large documents are ingested in steps: pending chunks wait in SQLite and the alarm continues.
 */
export class KnowledgeBaseIndex extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private dims = 0;
  private count = 0;
  private rowids = new Int32Array(0);
  private scales = new Float32Array(0);
  private data = new Int8Array(0);
  private slotOf = new Map<number, number>();
  /** Sign bits for the large-set pre-ranking; rebuilt on first query after any change. */
  private bitsCache: Uint32Array | null = null;
  /** Chunk frequency of search terms, kept until the next write. */
  private termFrequency = new Map<string, number>();
  /** Keyword scoring state: chunk lengths by rowid, and posting lists (rowid, term count) by stemmed term. */
  private lengths: { byRowid: Float32Array; count: number; total: number } | null = null;
  private postings = new Map<string, { rows: Int32Array; tfs: Uint16Array }>();
  private postingsSize = 0;
  private scoreBuffer = new Float64Array(0);
  private stemCache = new Map<string, string[]>();
  private loaded = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.migrate();
  }

  /** Creates this object's tables (again after destroy() wiped them). */
  private migrate(): void {
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS items (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, document_id TEXT, position INTEGER NOT NULL DEFAULT 0, text TEXT, metadata TEXT NOT NULL DEFAULT '{}');
      CREATE INDEX IF NOT EXISTS items_document ON items(document_id);
      CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(text, tokenize = 'porter unicode61');
      CREATE VIRTUAL TABLE IF NOT EXISTS items_terms USING fts5vocab(items_fts, instance);
      CREATE VIRTUAL TABLE IF NOT EXISTS scratch_fts USING fts5(text, tokenize = 'porter unicode61');
      CREATE VIRTUAL TABLE IF NOT EXISTS scratch_words USING fts5vocab(scratch_fts, instance);
      CREATE TABLE IF NOT EXISTS vector_blocks (block INTEGER PRIMARY KEY, count INTEGER NOT NULL, rowids BLOB NOT NULL, scales BLOB NOT NULL, data BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS pending (document_id TEXT NOT NULL, position INTEGER NOT NULL, kb_id TEXT NOT NULL, model TEXT NOT NULL, chunk TEXT NOT NULL, PRIMARY KEY (document_id, position));
    `);
    const columns = this.sql.exec<{ name: string }>("PRAGMA table_info(items)").toArray();
    if (!columns.some((c) => c.name === "tokens")) this.sql.exec("ALTER TABLE items ADD COLUMN tokens INTEGER");
  }

  // ---------- vectors in memory ----------

  private ensureLoaded(): void {
    if (this.loaded) return;
    const dims = this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'dims'").toArray()[0];
    this.dims = dims ? Number(dims.value) : 0;
    const blocks = this.sql.exec<{ block: number; count: number; rowids: ArrayBuffer; scales: ArrayBuffer; data: ArrayBuffer }>("SELECT block, count, rowids, scales, data FROM vector_blocks ORDER BY block").toArray();
    const total = blocks.reduce((n, b) => n + b.count, 0);
    this.reserve(total);
    this.count = 0;
    this.slotOf.clear();
    for (const b of blocks) {
      this.rowids.set(new Int32Array(b.rowids.slice(0, b.count * 4)), this.count);
      this.scales.set(new Float32Array(b.scales.slice(0, b.count * 4)), this.count);
      this.data.set(new Int8Array(b.data, 0, b.count * this.dims), this.count * this.dims);
      this.count += b.count;
    }
    for (let i = 0; i < this.count; i++) this.slotOf.set(this.rowids[i], i);
    this.bitsCache = null;
    this.loaded = true;
  }

  private reserve(n: number): void {
    if (n <= this.rowids.length) return;
    const capacity = Math.max(n, Math.ceil(this.rowids.length * 1.5), 1024);
    const rowids = new Int32Array(capacity);
    rowids.set(this.rowids.subarray(0, this.count));
    const scales = new Float32Array(capacity);
    scales.set(this.scales.subarray(0, this.count));
    const data = new Int8Array(capacity * Math.max(this.dims, 1));
    data.set(this.data.subarray(0, this.count * this.dims));
    this.rowids = rowids;
    this.scales = scales;
    this.data = data;
  }

  private persistBlocks(fromSlot: number): void {
    const first = Math.floor(fromSlot / BLOCK);
    const blocks = Math.ceil(this.count / BLOCK);
    for (let b = first; b < blocks; b++) {
      const start = b * BLOCK;
      const end = Math.min(this.count, start + BLOCK);
      this.sql.exec(
        "INSERT OR REPLACE INTO vector_blocks (block, count, rowids, scales, data) VALUES (?, ?, ?, ?, ?)",
        b,
        end - start,
        this.rowids.slice(start, end).buffer,
        this.scales.slice(start, end).buffer,
        this.data.slice(start * this.dims, end * this.dims).buffer,
      );
    }
    this.sql.exec("DELETE FROM vector_blocks WHERE block >= ?", blocks);
  }

  private setDims(dims: number): void {
    if (this.dims === dims) return;
    if (this.dims !== 0 && this.count > 0) throw new Error(`vector has ${dims} dimensions; this index holds ${this.dims}`);
    this.dims = dims;
    this.data = new Int8Array(this.rowids.length * dims);
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('dims', ?)", String(dims));
  }

  private writeVectors(entries: { rowid: number; values: ArrayLike<number> }[]): void {
    if (entries.length === 0) return;
    this.ensureLoaded();
    this.setDims(entries[0].values.length);
    this.reserve(this.count + entries.length);
    let firstTouched = this.count;
    for (const { rowid, values } of entries) {
      if (values.length !== this.dims) throw new Error(`vector has ${values.length} dimensions; this index holds ${this.dims}`);
      let slot = this.slotOf.get(rowid);
      if (slot === undefined) {
        slot = this.count++;
        this.slotOf.set(rowid, slot);
        this.rowids[slot] = rowid;
      }
      firstTouched = Math.min(firstTouched, slot);
      this.scales[slot] = quantize(values, this.data, slot * this.dims);
    }
    this.bitsCache = null;
    this.persistBlocks(firstTouched);
  }

  private removeVectors(rowids: number[]): void {
    this.ensureLoaded();
    let firstTouched = this.count;
    for (const rowid of rowids) {
      const slot = this.slotOf.get(rowid);
      if (slot === undefined) continue;
      const last = this.count - 1;
      // Swap-remove keeps the arrays dense; only two blocks change.
      if (slot !== last) {
        this.rowids[slot] = this.rowids[last];
        this.scales[slot] = this.scales[last];
        this.data.copyWithin(slot * this.dims, last * this.dims, (last + 1) * this.dims);
        this.slotOf.set(this.rowids[slot], slot);
      }
      this.slotOf.delete(rowid);
      this.count--;
      firstTouched = Math.min(firstTouched, slot);
    }
    this.bitsCache = null;
    if (firstTouched < this.count || rowids.length) this.persistBlocks(Math.min(firstTouched, this.count));
  }

  // ---------- items ----------

  private forgetTermStats(): void {
    this.termFrequency.clear();
    this.lengths = null;
    this.postings.clear();
    this.postingsSize = 0;
  }

  /** How many chunks hold a term (as FTS5 tokenizes and stems it). */
  private frequencyOf(term: string): number {
    let df = this.termFrequency.get(term);
    if (df === undefined) {
      df = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items_fts WHERE items_fts MATCH ?", matchExpression([term])).one().n;
      this.termFrequency.set(term, df);
    }
    return df;
  }

  private upsertItems(items: { id: string; documentId: string | null; position: number; text: string | null; metadata: VectorMetadata; values?: ArrayLike<number> }[]): number[] {
    this.forgetTermStats();
    const rowids: number[] = [];
    const vectors: { rowid: number; values: ArrayLike<number> }[] = [];
    for (const item of items) {
      const existing = this.sql.exec<{ rowid: number }>("SELECT rowid FROM items WHERE id = ?", item.id).toArray()[0];
      let rowid: number;
      if (existing) {
        rowid = existing.rowid;
        this.sql.exec("UPDATE items SET document_id = ?, position = ?, text = ?, metadata = ?, tokens = ? WHERE rowid = ?", item.documentId, item.position, item.text, JSON.stringify(item.metadata), item.text ? wordCount(item.text) : null, rowid);
        this.sql.exec("DELETE FROM items_fts WHERE rowid = ?", rowid);
      } else {
        rowid = this.sql.exec<{ rowid: number }>("INSERT INTO items (id, document_id, position, text, metadata, tokens) VALUES (?, ?, ?, ?, ?, ?) RETURNING rowid", item.id, item.documentId, item.position, item.text, JSON.stringify(item.metadata), item.text ? wordCount(item.text) : null).one().rowid;
      }
      if (item.text) this.sql.exec("INSERT INTO items_fts (rowid, text) VALUES (?, ?)", rowid, item.text);
      if (item.values) vectors.push({ rowid, values: item.values });
      rowids.push(rowid);
    }
    this.writeVectors(vectors);
    return rowids;
  }

  private deleteRows(rowids: number[]): void {
    this.forgetTermStats();
    for (const rowid of rowids) {
      this.sql.exec("DELETE FROM items_fts WHERE rowid = ?", rowid);
      this.sql.exec("DELETE FROM items WHERE rowid = ?", rowid);
    }
    this.removeVectors(rowids);
  }

  private allowedRowids(filter: FilterNode): Set<number> {
    const where = filterToSql(filter);
    const rows = this.sql.exec<{ rowid: number }>(`SELECT rowid FROM items WHERE ${where.sql}`, ...where.params).toArray();
    return new Set(rows.map((r) => r.rowid));
  }

  /** Ids (and, when asked, parsed metadata) of some rows, by rowid. */
  private rowsOf(rowids: number[], withMetadata: boolean): Map<number, { id: string; metadata: VectorMetadata }> {
    const out = new Map<number, { id: string; metadata: VectorMetadata }>();
    for (let i = 0; i < rowids.length; i += 90) {
      const part = rowids.slice(i, i + 90);
      const rows = this.sql.exec<{ rowid: number; id: string; metadata: string | null }>(`SELECT rowid, id, ${withMetadata ? "metadata" : "NULL AS metadata"} FROM items WHERE rowid IN (${part.map(() => "?").join(",")})`, ...part).toArray();
      for (const r of rows) out.set(r.rowid, { id: r.id, metadata: r.metadata ? (JSON.parse(r.metadata) as VectorMetadata) : {} });
    }
    return out;
  }

  // ---------- RPC: the Vectorize-shaped vector index ----------

  async vectorUpsert(vectors: { id: string; values: number[]; metadata?: VectorMetadata }[]): Promise<{ count: number }> {
    this.ctx.storage.transactionSync(() => {
      this.upsertItems(vectors.map((v) => ({ id: v.id, documentId: typeof v.metadata?.document_id === "string" ? v.metadata.document_id : null, position: 0, text: null, metadata: v.metadata ?? {}, values: v.values })));
    });
    return { count: vectors.length };
  }

  async vectorQuery(vector: number[], options: { topK: number; filter?: FilterNode; returnMetadata?: boolean }): Promise<{ matches: VectorMatch[] }> {
    this.ensureLoaded();
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    if (this.count === 0 || vector.length !== this.dims) return { matches: [] };
    const q = Float32Array.from(vector);
    const dims = this.dims;
    let ranked: { score: number; item: number }[];
    if (options.filter) {
      // The filter's SQL reading picks the candidates; each is scored exactly.
      const best = new TopK(topK * 2);
      for (const rowid of this.allowedRowids(options.filter)) {
        const slot = this.slotOf.get(rowid);
        if (slot !== undefined) best.push(dotInt8(q, this.data, slot * dims, dims) * this.scales[slot], slot);
      }
      ranked = best.sorted();
    } else {
      ranked = nearest({ count: this.count, dims, data: this.data, scales: this.scales, bits: () => (this.bitsCache ??= signBits(this.data, this.count, dims)) }, q, topK);
    }
    const meta = this.rowsOf(ranked.map((r) => this.rowids[r.item]), options.filter !== undefined || options.returnMetadata === true);
    const matches: VectorMatch[] = [];
    for (const r of ranked) {
      const m = meta.get(this.rowids[r.item]);
      if (!m) continue;
      // The same filter, read as a predicate: SQL chose the candidates, this confirms each one.
      if (options.filter && !matchesFilter(options.filter, m.metadata)) continue;
      matches.push({ id: m.id, score: r.score, metadata: options.returnMetadata ? m.metadata : undefined });
      if (matches.length >= topK) break;
    }
    return { matches };
  }

  async vectorGetByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]> {
    this.ensureLoaded();
    const out: { id: string; values: number[]; metadata?: VectorMetadata }[] = [];
    for (const id of ids) {
      const row = this.sql.exec<{ rowid: number; metadata: string }>("SELECT rowid, metadata FROM items WHERE id = ?", id).toArray()[0];
      const slot = row ? this.slotOf.get(row.rowid) : undefined;
      if (!row || slot === undefined) continue;
      const scale = this.scales[slot];
      const values = Array.from(this.data.subarray(slot * this.dims, (slot + 1) * this.dims), (v) => v * scale);
      out.push({ id, values, metadata: JSON.parse(row.metadata) as VectorMetadata });
    }
    return out;
  }

  async vectorDeleteByIds(ids: string[]): Promise<{ count: number }> {
    let count = 0;
    this.ctx.storage.transactionSync(() => {
      const rowids: number[] = [];
      for (const id of ids) {
        const row = this.sql.exec<{ rowid: number }>("SELECT rowid FROM items WHERE id = ?", id).toArray()[0];
        if (row) rowids.push(row.rowid);
      }
      this.deleteRows(rowids);
      count = rowids.length;
    });
    return { count };
  }

  // ---------- RPC: chunks and keyword search ----------

  /**
   * The stemmed forms FTS5 gives these words: each uncached word is written as one row of a
   * scratch FTS5 table, its terms read back, and the write rolled back. Stemming never changes,
   * so the answers are kept (bounded) for the object's lifetime.
   */
  private stems(words: string[]): string[] {
    const missing = words.filter((w) => !this.stemCache.has(w));
    if (missing.length) {
      const found = new Map<string, string[]>(missing.map((w) => [w, []]));
      try {
        this.ctx.storage.transactionSync(() => {
          missing.forEach((word, i) => this.sql.exec("INSERT INTO scratch_fts (rowid, text) VALUES (?, ?)", i + 1, word));
          for (const row of this.sql.exec<{ term: string; doc: number }>("SELECT term, doc FROM scratch_words").toArray()) found.get(missing[row.doc - 1])?.push(row.term);
          throw new Rollback();
        });
      } catch (error) {
        if (!(error instanceof Rollback)) throw error;
      }
      if (this.stemCache.size > 50_000) this.stemCache.clear();
      for (const [word, terms] of found) this.stemCache.set(word, terms);
    }
    return [...new Set(words.flatMap((w) => this.stemCache.get(w) ?? []))];
  }

  private chunkLengths(): { byRowid: Float32Array; count: number; total: number } {
    if (this.lengths) return this.lengths;
    const rows = this.sql.exec<{ rowid: number; tokens: number | null; text: string | null }>("SELECT rowid, tokens, CASE WHEN tokens IS NULL THEN text END AS text FROM items WHERE text IS NOT NULL AND text != ''").toArray();
    let max = 0;
    for (const r of rows) max = Math.max(max, r.rowid);
    const byRowid = new Float32Array(max + 1);
    let total = 0;
    for (const r of rows) {
      const n = r.tokens ?? wordCount(r.text ?? "");
      byRowid[r.rowid] = n;
      total += n;
    }
    this.lengths = { byRowid, count: rows.length, total };
    return this.lengths;
  }

  /** Which chunks hold a stemmed term, and how often: FTS5's own index, read once and cached. */
  private postingsOf(stem: string): { rows: Int32Array; tfs: Uint16Array } {
    const cached = this.postings.get(stem);
    if (cached) return cached;
    const rows = this.sql.exec<{ doc: number; n: number }>("SELECT doc, count(*) AS n FROM items_terms WHERE term = ? GROUP BY doc", stem).toArray();
    const entry = { rows: Int32Array.from(rows, (r) => r.doc), tfs: Uint16Array.from(rows, (r) => Math.min(r.n, 65535)) };
    if (this.postingsSize + rows.length > MAX_CACHED_POSTINGS) {
      this.postings.clear();
      this.postingsSize = 0;
    }
    this.postings.set(stem, entry);
    this.postingsSize += rows.length;
    return entry;
  }

  /**
   * BM25 exactly as FTS5's bm25() computes it (same index, stemming, k1, b and idf floor), summed
   * in memory over cached posting lists, so a query costs a pass over its terms' postings instead
   * of a ranking-function call per matching row.
   */
  private bm25(terms: string[], topK: number, allowed: Set<number> | undefined): { rowid: number; score: number }[] {
    const stems = this.stems(terms);
    const { byRowid, count, total } = this.chunkLengths();
    if (count === 0 || stems.length === 0) return [];
    const avgdl = total / count;
    if (this.scoreBuffer.length < byRowid.length) this.scoreBuffer = new Float64Array(byRowid.length);
    const scores = this.scoreBuffer;
    const touched: number[] = [];
    for (const stem of stems) {
      const { rows, tfs } = this.postingsOf(stem);
      if (rows.length === 0) continue;
      let idf = Math.log((count - rows.length + 0.5) / (rows.length + 0.5));
      if (idf <= 0) idf = 1e-6;
      for (let i = 0; i < rows.length; i++) {
        const rowid = rows[i];
        if (rowid >= byRowid.length || (allowed && !allowed.has(rowid))) continue;
        const tf = tfs[i];
        const s = (idf * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * byRowid[rowid]) / avgdl));
        if (scores[rowid] === 0) touched.push(rowid);
        scores[rowid] += s;
      }
    }
    const best = new TopK(topK);
    for (const rowid of touched) {
      best.push(scores[rowid], rowid);
      scores[rowid] = 0;
    }
    return best.sorted().map((r) => ({ rowid: r.item, score: r.score }));
  }

  /** BM25 over FTS5, restricted by the filter inside the same SQL statement. */
  async keywordSearch(text: string, options: { topK: number; filter?: FilterNode }): Promise<KeywordHit[]> {
    const terms = queryTerms(text);
    if (terms.length === 0) return [];
    const chosen = selectTerms(terms, (t) => this.frequencyOf(t));
    if (chosen.length === 0) return [];
    const match = matchExpression(chosen);
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    let rows: { rowid: number; score: number }[];
    try {
      rows = this.bm25(chosen, topK, options.filter ? this.allowedRowids(options.filter) : undefined);
    } catch (error) {
      // The in-memory scorer is an accelerator: if it fails, FTS5 ranks the same way in SQL.
      console.error(JSON.stringify({ level: "warn", what: "in-memory BM25 failed; using FTS5 rank", error: error instanceof Error ? error.message : String(error) }));
      const where = options.filter ? filterToSql(options.filter) : undefined;
      rows = this.sql
        .exec<{ rowid: number; score: number }>(
          `SELECT rowid, -rank AS score FROM items_fts WHERE items_fts MATCH ? ${where ? `AND rowid IN (SELECT rowid FROM items WHERE ${where.sql})` : ""} ORDER BY rank LIMIT ?`,
          match,
          ...(where?.params ?? []),
          topK,
        )
        .toArray();
    }
    const info = this.rowsOf(rows.map((r) => r.rowid), options.filter !== undefined);
    const hits: KeywordHit[] = [];
    for (const row of rows) {
      const item = info.get(row.rowid);
      if (!item) continue;
      if (options.filter && !matchesFilter(options.filter, item.metadata)) continue;
      hits.push({ id: item.id, score: row.score });
    }
    return hits;
  }

  /**
   * Keyword and vector retrieval in one call (Loom's own vector index): one round trip instead of
   * two, since this object serves its requests one at a time anyway.
   */
  async search(request: { text: string; vector?: number[]; filter?: FilterNode; topK: number; keyword: boolean }): Promise<{ keyword: KeywordHit[]; vector: KeywordHit[] }> {
    const keyword = request.keyword ? await this.keywordSearch(request.text, { topK: request.topK, filter: request.filter }) : [];
    const vector = request.vector ? (await this.vectorQuery(request.vector, { topK: request.topK, filter: request.filter })).matches.map((m) => ({ id: m.id, score: m.score })) : [];
    return { keyword, vector };
  }

  async getChunks(ids: string[]): Promise<StoredChunk[]> {
    const out: StoredChunk[] = [];
    for (let i = 0; i < ids.length; i += 90) {
      const part = ids.slice(i, i + 90);
      const rows = this.sql
        .exec<{ id: string; document_id: string | null; position: number; text: string | null; metadata: string }>(`SELECT id, document_id, position, text, metadata FROM items WHERE id IN (${part.map(() => "?").join(",")})`, ...part)
        .toArray();
      for (const r of rows) out.push({ id: r.id, documentId: r.document_id ?? "", position: r.position, text: r.text ?? "", metadata: JSON.parse(r.metadata) as VectorMetadata });
    }
    return out;
  }

  /** Every chunk of some documents, in order (retrieval_unit documents/pages, summaries). */
  async documentChunks(documentIds: string[], limitPerDocument: number): Promise<StoredChunk[]> {
    const out: StoredChunk[] = [];
    for (const documentId of documentIds) {
      const rows = this.sql
        .exec<{ id: string; position: number; text: string | null; metadata: string }>("SELECT id, position, text, metadata FROM items WHERE document_id = ? ORDER BY position LIMIT ?", documentId, limitPerDocument)
        .toArray();
      for (const r of rows) out.push({ id: r.id, documentId, position: r.position, text: r.text ?? "", metadata: JSON.parse(r.metadata) as VectorMetadata });
    }
    return out;
  }

  /** Removes documents' chunks, keyword entries, vectors and any pending steps. */
  async deleteDocuments(documentIds: string[]): Promise<{ chunks: string[] }> {
    const removed: string[] = [];
    this.ctx.storage.transactionSync(() => {
      for (const documentId of documentIds) {
        const rows = this.sql.exec<{ rowid: number; id: string }>("SELECT rowid, id FROM items WHERE document_id = ?", documentId).toArray();
        this.deleteRows(rows.map((r) => r.rowid));
        removed.push(...rows.map((r) => r.id));
        this.sql.exec("DELETE FROM pending WHERE document_id = ?", documentId);
      }
    });
    return { chunks: removed };
  }

  /** Drops everything this knowledge base holds. */
  async destroy(): Promise<void> {
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    this.migrate();
    this.forgetTermStats();
    this.loaded = false;
    this.count = 0;
    this.dims = 0;
    this.slotOf.clear();
  }

  async stats(): Promise<{ chunks: number; vectors: number; dimensions: number; pending: number }> {
    this.ensureLoaded();
    const chunks = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n;
    const pending = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n;
    return { chunks, vectors: this.count, dimensions: this.dims, pending };
  }

  /** Test and diagnostics hook: forget the in-memory vectors as an eviction would. */
  async dropMemory(): Promise<void> {
    this.loaded = false;
    this.count = 0;
    this.rowids = new Int32Array(0);
    this.scales = new Float32Array(0);
    this.data = new Int8Array(0);
    this.slotOf.clear();
  }

  // ---------- RPC: ingestion in steps ----------

  /**
   * Queues a document's chunks and runs the first step now. A document that does not finish in
   * one step is continued by the alarm; every step commits before the next starts, so a restart
   * resumes where it stopped.
   */
  async ingest(job: IngestJob, options: { reset: boolean; start: boolean }): Promise<IngestResult> {
    this.ctx.storage.transactionSync(() => {
      if (options.reset) this.sql.exec("DELETE FROM pending WHERE document_id = ?", job.documentId);
      for (const chunk of job.chunks) {
        this.sql.exec("INSERT OR REPLACE INTO pending (document_id, position, kb_id, model, chunk) VALUES (?, ?, ?, ?, ?)", job.documentId, chunk.position, job.kbId, job.embeddingModel, JSON.stringify(chunk));
      }
    });
    if (!options.start) return { status: "indexing", remaining: job.chunks.length };
    const result = await this.step(job.documentId);
    if (result.status === "indexing") await this.ctx.storage.setAlarm(Date.now());
    return result;
  }

  private async step(documentId: string): Promise<IngestResult> {
    const rows = this.sql
      .exec<{ position: number; kb_id: string; model: string; chunk: string }>("SELECT position, kb_id, model, chunk FROM pending WHERE document_id = ? ORDER BY position LIMIT ?", documentId, STEP_CHUNKS)
      .toArray();
    if (rows.length === 0) return { status: "ready", chunks: this.documentChunkCount(documentId) };
    try {
      const embedder = await resolveEmbedder(this.env, rows[0].model);
      const chunks = rows.map((r) => JSON.parse(r.chunk) as ChunkInput);
      const vectors = await embedder.embed(chunks.map((c) => c.text));
      const backend = vectorIndexFor(this.env, rows[0].kb_id);
      this.ctx.storage.transactionSync(() => {
        this.upsertItems(chunks.map((c, i) => ({ id: c.id, documentId: c.documentId, position: c.position, text: c.text, metadata: c.metadata, values: backend ? undefined : vectors[i] })));
        this.sql.exec("DELETE FROM pending WHERE document_id = ? AND position <= ?", documentId, rows[rows.length - 1].position);
      });
      if (backend) await backend.upsert(chunks.map((c, i) => ({ id: c.id, values: vectors[i], metadata: c.metadata })));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.sql.exec("DELETE FROM pending WHERE document_id = ?", documentId);
      return { status: "failed", error: `indexing failed: ${message}` };
    }
    const left = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending WHERE document_id = ?", documentId).one().n;
    return left > 0 ? { status: "indexing", remaining: left } : { status: "ready", chunks: this.documentChunkCount(documentId) };
  }

  private documentChunkCount(documentId: string): number {
    return this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items WHERE document_id = ?", documentId).one().n;
  }

  /** Continues pending documents one step at a time; safe to run twice. */
  override async alarm(): Promise<void> {
    const next = this.sql.exec<{ document_id: string; kb_id: string }>("SELECT document_id, kb_id FROM pending ORDER BY rowid LIMIT 1").toArray()[0];
    if (!next) return;
    const result = await this.step(next.document_id);
    if (result.status !== "indexing") await markDocumentIndexed(this.env, next.document_id, result);
    const more = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n;
    if (more > 0) await this.ctx.storage.setAlarm(Date.now());
  }
}
