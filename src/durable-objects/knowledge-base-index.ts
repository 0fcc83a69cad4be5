import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { filterToSql, matchesFilter, type FilterNode } from "../features/knowledge-bases/metadata-filter";
import { MAX_TOP_K, type VectorMatch, type VectorMetadata } from "../features/knowledge-bases/vector-index";
import { matchExpression, queryTerms, selectTerms } from "../features/knowledge-bases/keyword-query";
import { vectorIndexFor } from "../features/knowledge-bases/vector-backend";
import { resolveEmbedder } from "../features/knowledge-bases/embedders";
import { markDocumentIndexed } from "../features/knowledge-bases/documents.repository";
import { VectorStore } from "../features/knowledge-bases/vector-store";
import { KeywordScorer, wordCount } from "../features/knowledge-bases/keyword-scorer";
import type { Scored } from "../features/knowledge-bases/hybrid-search";
import { applyLimits, fuseHalves, fuseQueries, keepTopGroups, needsShaping, pageKey, type RankedChunk, type RetrieveRequest, type RetrieveResult, type StoredChunk } from "../features/knowledge-bases/retrieval";

export type { StoredChunk } from "../features/knowledge-bases/retrieval";

/** Chunks embedded per step; a step keeps well inside one request's CPU budget. */
const STEP_CHUNKS = 1000;
/** SQLite bound parameters per statement, kept well under the limit. */
const IN_BATCH = 90;

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

export interface KeywordHit {
  id: string;
  score: number;
}

/** Sent back instead of throwing, since a thrown error loses its code across RPC. */
export type IngestResult = { status: "ready"; chunks: number } | { status: "indexing"; remaining: number } | { status: "failed"; error: string };

type ChunkRow = { rowid: number; id: string; document_id: string | null; position: number; text: string | null; metadata: string };

function toChunk(r: Omit<ChunkRow, "rowid">): StoredChunk {
  return { id: r.id, documentId: r.document_id ?? "", position: r.position, text: r.text ?? "", metadata: JSON.parse(r.metadata) as VectorMetadata };
}

/**
 * One per knowledge base. Its SQLite holds the chunks (text, document id, metadata JSON), an FTS5
 * keyword index over them (scored by KeywordScorer) and their vectors (VectorStore: int8, packed
 * many per row, scanned with SIMD in memory). A query's whole retrieval runs here in one call
 * (retrieve). Large documents are ingested in steps: pending chunks wait in SQLite and the alarm
 * continues.
 */
export class KnowledgeBaseIndex extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly vectors: VectorStore;
  private readonly keywords: KeywordScorer;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.vectors = new VectorStore(this.sql);
    this.keywords = new KeywordScorer(ctx.storage);
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
      CREATE TABLE IF NOT EXISTS length_blocks (block INTEGER PRIMARY KEY, data BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS postings_cache (term TEXT PRIMARY KEY, rows BLOB NOT NULL, tfs BLOB NOT NULL);
      CREATE TABLE IF NOT EXISTS pending (document_id TEXT NOT NULL, position INTEGER NOT NULL, kb_id TEXT NOT NULL, model TEXT NOT NULL, chunk TEXT NOT NULL, PRIMARY KEY (document_id, position));
    `);
    const columns = this.sql.exec<{ name: string }>("PRAGMA table_info(items)").toArray();
    if (!columns.some((c) => c.name === "tokens")) this.sql.exec("ALTER TABLE items ADD COLUMN tokens INTEGER");
  }

  // ---------- items ----------

  private upsertItems(items: { id: string; documentId: string | null; position: number; text: string | null; metadata: VectorMetadata; values?: ArrayLike<number> }[]): number[] {
    this.keywords.invalidate();
    const rowids: number[] = [];
    const lengths: { rowid: number; tokens: number | null }[] = [];
    const vectors: { rowid: number; values: ArrayLike<number> }[] = [];
    for (const item of items) {
      const existing = this.sql.exec<{ rowid: number }>("SELECT rowid FROM items WHERE id = ?", item.id).toArray()[0];
      const tokens = item.text ? wordCount(item.text) : null;
      let rowid: number;
      if (existing) {
        rowid = existing.rowid;
        this.sql.exec("UPDATE items SET document_id = ?, position = ?, text = ?, metadata = ?, tokens = ? WHERE rowid = ?", item.documentId, item.position, item.text, JSON.stringify(item.metadata), tokens, rowid);
        this.sql.exec("DELETE FROM items_fts WHERE rowid = ?", rowid);
      } else {
        rowid = this.sql.exec<{ rowid: number }>("INSERT INTO items (id, document_id, position, text, metadata, tokens) VALUES (?, ?, ?, ?, ?, ?) RETURNING rowid", item.id, item.documentId, item.position, item.text, JSON.stringify(item.metadata), tokens).one().rowid;
      }
      if (item.text) this.sql.exec("INSERT INTO items_fts (rowid, text) VALUES (?, ?)", rowid, item.text);
      lengths.push({ rowid, tokens });
      if (item.values) vectors.push({ rowid, values: item.values });
      rowids.push(rowid);
    }
    this.keywords.recordLengths(lengths);
    this.vectors.write(vectors);
    return rowids;
  }

  private deleteRows(rowids: number[]): void {
    this.keywords.invalidate();
    this.keywords.recordLengths(rowids.map((rowid) => ({ rowid, tokens: null })));
    for (const rowid of rowids) {
      this.sql.exec("DELETE FROM items_fts WHERE rowid = ?", rowid);
      this.sql.exec("DELETE FROM items WHERE rowid = ?", rowid);
    }
    this.vectors.remove(rowids);
  }

  /** The rowids the filter admits, read by its SQL form. */
  private allowedRowids(filter: FilterNode): Set<number> {
    const where = filterToSql(filter);
    const rows = this.sql.exec<{ rowid: number }>(`SELECT rowid FROM items WHERE ${where.sql}`, ...where.params).toArray();
    return new Set(rows.map((r) => r.rowid));
  }

  /** Some rows by rowid, in batches under SQLite's parameter limit. */
  private rowsByRowid(rowids: number[], columns: string): ChunkRow[] {
    const out: ChunkRow[] = [];
    for (let i = 0; i < rowids.length; i += IN_BATCH) {
      const part = rowids.slice(i, i + IN_BATCH);
      out.push(...this.sql.exec<ChunkRow>(`SELECT rowid, ${columns} FROM items WHERE rowid IN (${part.map(() => "?").join(",")})`, ...part).toArray());
    }
    return out;
  }

  /** Ids (and, when asked, parsed metadata) of some rows, by rowid. */
  private rowsOf(rowids: number[], withMetadata: boolean): Map<number, { id: string; metadata: VectorMetadata }> {
    const rows = this.rowsByRowid(rowids, withMetadata ? "id, metadata" : "id, '{}' AS metadata");
    return new Map(rows.map((r) => [r.rowid, { id: r.id, metadata: withMetadata ? (JSON.parse(r.metadata) as VectorMetadata) : {} }]));
  }

  // ---------- RPC: the Vectorize-shaped vector index ----------

  async vectorUpsert(vectors: { id: string; values: number[]; metadata?: VectorMetadata }[]): Promise<{ count: number }> {
    this.ctx.storage.transactionSync(() => {
      this.upsertItems(vectors.map((v) => ({ id: v.id, documentId: typeof v.metadata?.document_id === "string" ? v.metadata.document_id : null, position: 0, text: null, metadata: v.metadata ?? {}, values: v.values })));
    });
    return { count: vectors.length };
  }

  async vectorQuery(vector: number[], options: { topK: number; filter?: FilterNode; returnMetadata?: boolean }): Promise<{ matches: VectorMatch[] }> {
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    const ranked = this.vectors.nearest(vector, topK, options.filter ? this.allowedRowids(options.filter) : undefined);
    const meta = this.rowsOf(ranked.map((r) => r.rowid), options.filter !== undefined || options.returnMetadata === true);
    const matches: VectorMatch[] = [];
    for (const r of ranked) {
      const m = meta.get(r.rowid);
      if (!m) continue;
      // The same filter, read as a predicate: SQL chose the candidates, this confirms each one.
      if (options.filter && !matchesFilter(options.filter, m.metadata)) continue;
      matches.push({ id: m.id, score: r.score, metadata: options.returnMetadata ? m.metadata : undefined });
    }
    return { matches };
  }

  async vectorGetByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]> {
    const out: { id: string; values: number[]; metadata?: VectorMetadata }[] = [];
    for (const id of ids) {
      const row = this.sql.exec<{ rowid: number; metadata: string }>("SELECT rowid, metadata FROM items WHERE id = ?", id).toArray()[0];
      const values = row ? this.vectors.valuesOf(row.rowid) : undefined;
      if (row && values) out.push({ id, values, metadata: JSON.parse(row.metadata) as VectorMetadata });
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

  // ---------- RPC: retrieval ----------

  /** BM25 candidates by rowid; if the in-memory scorer fails, FTS5 ranks the same way in SQL. */
  private keywordRows(text: string, topK: number, filter: FilterNode | undefined, allowed: Set<number> | undefined): Scored<number>[] {
    const terms = queryTerms(text);
    if (terms.length === 0) return [];
    const chosen = selectTerms(terms, (t) => this.keywords.frequencyOf(t));
    if (chosen.length === 0) return [];
    try {
      return this.keywords.score(chosen, topK, allowed).map((r) => ({ id: r.rowid, score: r.score }));
    } catch (error) {
      console.error(JSON.stringify({ level: "warn", what: "in-memory BM25 failed; using FTS5 rank", error: error instanceof Error ? error.message : String(error) }));
      const where = filter ? filterToSql(filter) : undefined;
      return this.sql
        .exec<{ rowid: number; score: number }>(
          `SELECT rowid, -rank AS score FROM items_fts WHERE items_fts MATCH ? ${where ? `AND rowid IN (SELECT rowid FROM items WHERE ${where.sql})` : ""} ORDER BY rank LIMIT ?`,
          matchExpression(chosen),
          ...(where?.params ?? []),
          topK,
        )
        .toArray()
        .map((r) => ({ id: r.rowid, score: r.score }));
    }
  }

  /** BM25 over FTS5, restricted by the filter (pseudo-relevance feedback reads this directly). */
  async keywordSearch(text: string, options: { topK: number; filter?: FilterNode }): Promise<KeywordHit[]> {
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    const rows = this.keywordRows(text, topK, options.filter, options.filter ? this.allowedRowids(options.filter) : undefined);
    const info = this.rowsOf(rows.map((r) => r.id), options.filter !== undefined);
    const hits: KeywordHit[] = [];
    for (const row of rows) {
      const item = info.get(row.id);
      if (!item) continue;
      if (options.filter && !matchesFilter(options.filter, item.metadata)) continue;
      hits.push({ id: item.id, score: row.score });
    }
    return hits;
  }

  /** Vector matches given by chunk id (from a Vectorize index), as rowids the filter admits. */
  private rowidsOfHits(hits: Scored[], allowed: Set<number> | undefined): Scored<number>[] {
    const rowidOf = new Map<string, number>();
    for (let i = 0; i < hits.length; i += IN_BATCH) {
      const part = hits.slice(i, i + IN_BATCH).map((h) => h.id);
      for (const r of this.sql.exec<{ rowid: number; id: string }>(`SELECT rowid, id FROM items WHERE id IN (${part.map(() => "?").join(",")})`, ...part)) rowidOf.set(r.id, r.rowid);
    }
    return hits.flatMap((h) => {
      const rowid = rowidOf.get(h.id);
      return rowid !== undefined && (!allowed || allowed.has(rowid)) ? [{ id: rowid, score: h.score }] : [];
    });
  }

  /**
   * A query's whole retrieval in one call: keyword and vector candidates per query, fusion, the
   * score cutoff and limits, then the text of only the chunks the answer shows. Every chunk
   * returned is confirmed against the filter's predicate form as well as its SQL form.
   */
  async retrieve(request: RetrieveRequest): Promise<RetrieveResult> {
    const allowed = request.filter ? this.allowedRowids(request.filter) : undefined;
    const perQuery = request.queries.map((query) => {
      const keyword = request.mode !== "vector" ? this.keywordRows(query.text, request.depth, request.filter, allowed) : [];
      let vector: Scored<number>[] = [];
      if (request.mode !== "keyword" && query.vector) vector = this.vectors.nearest(query.vector, request.depth, allowed).map((r) => ({ id: r.rowid, score: r.score }));
      else if (request.mode !== "keyword" && query.vectorHits) vector = this.rowidsOfHits(query.vectorHits, allowed);
      return fuseHalves(keyword, vector, request);
    });
    const shortlist = fuseQueries(perQuery, request.dataFusion)
      .filter((s) => request.scoreCutoff === undefined || s.score >= request.scoreCutoff)
      .slice(0, request.depth);
    const shaping = needsShaping(request);
    // Plain chunk results read only the top `topK` (more only if some fail the filter's predicate).
    const ranked: RankedChunk[] = [];
    const batch = shaping ? shortlist.length : request.topK;
    for (let i = 0; i < shortlist.length && (shaping || ranked.length < request.topK); i += batch) {
      const part = shortlist.slice(i, i + batch);
      const rows = new Map(this.rowsByRowid(part.map((s) => s.id), "id, document_id, position, text, metadata").map((r) => [r.rowid, r]));
      for (const s of part) {
        const row = rows.get(s.id);
        if (!row) continue;
        const chunk = toChunk(row);
        if (request.filter && !matchesFilter(request.filter, chunk.metadata)) continue;
        ranked.push({ chunk, score: s.score });
      }
    }
    const kept = keepTopGroups(request.unit, applyLimits(ranked, request), request.topK);
    return { ranked: kept, pageTexts: request.unit === "pages" ? this.pageTexts(kept) : [] };
  }

  /** The whole text of each page some ranked chunks come from. */
  private pageTexts(ranked: RankedChunk[]): [string, string][] {
    const pages = new Set(ranked.map(({ chunk }) => pageKey(chunk)));
    const texts = new Map<string, string>();
    for (const documentId of new Set(ranked.map(({ chunk }) => chunk.documentId))) {
      for (const row of this.sql.exec<Omit<ChunkRow, "rowid">>("SELECT id, document_id, position, text, metadata FROM items WHERE document_id = ? ORDER BY position LIMIT 20000", documentId)) {
        const chunk = toChunk(row);
        const key = pageKey(chunk);
        if (pages.has(key)) texts.set(key, texts.has(key) ? `${texts.get(key)}\n\n${chunk.text}` : chunk.text);
      }
    }
    return [...texts];
  }

  async getChunks(ids: string[]): Promise<StoredChunk[]> {
    const out: StoredChunk[] = [];
    for (let i = 0; i < ids.length; i += IN_BATCH) {
      const part = ids.slice(i, i + IN_BATCH);
      for (const r of this.sql.exec<Omit<ChunkRow, "rowid">>(`SELECT id, document_id, position, text, metadata FROM items WHERE id IN (${part.map(() => "?").join(",")})`, ...part)) out.push(toChunk(r));
    }
    return out;
  }

  /** Every chunk of some documents, in order (retrieval_unit documents/pages, summaries). */
  async documentChunks(documentIds: string[], limitPerDocument: number): Promise<StoredChunk[]> {
    const out: StoredChunk[] = [];
    for (const documentId of documentIds) {
      for (const r of this.sql.exec<Omit<ChunkRow, "rowid">>("SELECT id, document_id, position, text, metadata FROM items WHERE document_id = ? ORDER BY position LIMIT ?", documentId, limitPerDocument)) out.push(toChunk(r));
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
    this.keywords.forget();
    this.vectors.unload();
  }

  async stats(): Promise<{ chunks: number; vectors: number; dimensions: number; pending: number }> {
    const chunks = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n;
    const pending = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n;
    return { chunks, vectors: this.vectors.size, dimensions: this.vectors.dims, pending };
  }

  /** Test and diagnostics hook: forget the in-memory vectors as an eviction would. */
  async dropMemory(): Promise<void> {
    this.vectors.unload();
    this.keywords.forget();
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
