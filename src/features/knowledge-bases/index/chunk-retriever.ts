import { filterToSql, matchesFilter, type FilterNode } from "../metadata-filter";
import { MAX_TOP_K, type VectorMatch, type VectorMetadata } from "./vector-index";
import { matchExpression, queryTermCounts, selectTerms } from "./keyword-query";
import { expandWithFeedback, FEEDBACK, feedbackWords } from "./keyword-feedback";
import { boostTitles, leadingTitle, TITLE_BOOST } from "./title-boost";
import { rocchio, VECTOR_FEEDBACK } from "./vector-feedback";
import type { VectorStore } from "./vector-store";
import type { KeywordScorer } from "./keyword-scorer";
import type { Scored } from "./hybrid-search";
import {
  applyLimits,
  fuseHalves,
  fuseQueries,
  keepTopGroups,
  needsShaping,
  pageKey,
  type RankedChunk,
  type RetrieveRequest,
  type RetrieveResult,
  type StoredChunk,
} from "./retrieval";
import { causeChain, logEvent } from "../../../lib/log";

/** SQLite bound parameters per statement, kept well under the limit. */
const IN_BATCH = 90;

export interface KeywordHit {
  id: string;
  score: number;
}

export type ChunkRow = {
  rowid: number;
  id: string;
  document_id: string | null;
  position: number;
  text: string | null;
  metadata: string;
};

export function toChunk(r: Omit<ChunkRow, "rowid">): StoredChunk {
  return {
    id: r.id,
    documentId: r.document_id ?? "",
    position: r.position,
    text: r.text ?? "",
    metadata: JSON.parse(r.metadata) as VectorMetadata,
  };
}

/**
 * The read side of a knowledge base's index Durable Object: vector and keyword candidates, the
 * whole retrieval of a query (retrieve), and chunk reads, over the object's SQLite (`items`, the
 * FTS5 index) and its in-memory VectorStore and KeywordScorer. The object owns the writes.
 */
export class ChunkRetriever {
  constructor(
    private readonly sql: SqlStorage,
    private readonly vectors: VectorStore,
    private readonly keywords: KeywordScorer,
  ) {}

  /** The rowids the filter admits, read by its SQL form. */
  allowedRowids(filter: FilterNode): Set<number> {
    const where = filterToSql(filter);
    const rows = this.sql
      .exec<{ rowid: number }>(`SELECT rowid FROM items WHERE ${where.sql}`, ...where.params)
      .toArray();
    return new Set(rows.map((r) => r.rowid));
  }

  /** Some rows by rowid, in batches under SQLite's parameter limit. */
  rowsByRowid(rowids: number[], columns: string): ChunkRow[] {
    const out: ChunkRow[] = [];
    for (let i = 0; i < rowids.length; i += IN_BATCH) {
      const part = rowids.slice(i, i + IN_BATCH);
      out.push(
        ...this.sql
          .exec<ChunkRow>(
            `SELECT rowid, ${columns} FROM items WHERE rowid IN (${part.map(() => "?").join(",")})`,
            ...part,
          )
          .toArray(),
      );
    }
    return out;
  }

  /** The text of those of some rows that are their document's first chunk (the only ones a title can lead). */
  firstChunkTexts(rowids: number[]): { rowid: number; text: string | null }[] {
    const out: { rowid: number; text: string | null }[] = [];
    for (let i = 0; i < rowids.length; i += IN_BATCH) {
      const part = rowids.slice(i, i + IN_BATCH);
      out.push(
        ...this.sql
          .exec<{ rowid: number; text: string | null }>(
            `SELECT rowid, text FROM items WHERE rowid IN (${part.map(() => "?").join(",")}) AND position = 0`,
            ...part,
          )
          .toArray(),
      );
    }
    return out;
  }

  /** Ids (and, when asked, parsed metadata) of some rows, by rowid. */
  private rowsOf(rowids: number[], withMetadata: boolean): Map<number, { id: string; metadata: VectorMetadata }> {
    const rows = this.rowsByRowid(rowids, withMetadata ? "id, metadata" : "id, '{}' AS metadata");
    return new Map(
      rows.map((r) => [
        r.rowid,
        { id: r.id, metadata: withMetadata ? (JSON.parse(r.metadata) as VectorMetadata) : {} },
      ]),
    );
  }

  /** The Vectorize-shaped query: the `topK` nearest vectors the filter admits. */
  vectorQuery(
    vector: number[],
    options: { topK: number; filter?: FilterNode; returnMetadata?: boolean },
  ): { matches: VectorMatch[] } {
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    const ranked = this.vectors.nearest(vector, topK, options.filter ? this.allowedRowids(options.filter) : undefined);
    const meta = this.rowsOf(
      ranked.map((r) => r.rowid),
      options.filter !== undefined || options.returnMetadata === true,
    );
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

  /**
   * BM25 candidates by rowid, each query term weighted by how often the query says it, then
   * (with `feedback`) re-ranked once with pseudo-relevance feedback from this pass's top chunks.
   * If the in-memory scorer fails, FTS5 ranks the plain terms in SQL.
   */
  private keywordRows(
    text: string,
    topK: number,
    filter: FilterNode | undefined,
    allowed: Set<number> | undefined,
    feedback = true,
  ): Scored<number>[] {
    const counts = queryTermCounts(text);
    if (counts.size === 0) return [];
    const chosen = selectTerms([...counts.keys()], (t) => this.keywords.frequencyOf(t));
    if (chosen.length === 0) return [];
    try {
      const query = this.keywords.weightedStems(new Map(chosen.map((t) => [t, counts.get(t) ?? 1])));
      // With feedback, this pass serves only its first FEEDBACK.docs rows (and whether it has 2).
      const head = feedback === false ? undefined : FEEDBACK.docs;
      const hits = this.keywords
        .scoreStems(query, topK, allowed, undefined, head)
        .map((r) => ({ id: r.rowid, score: r.score }));
      if (feedback === false || hits.length < 2) return this.boostTitles(hits, query);
      const top = hits.slice(0, FEEDBACK.docs);
      const texts = new Map(
        this.rowsByRowid(
          top.map((h) => h.id),
          "text",
        ).map((r) => [r.rowid, r.text ?? ""]),
      );
      const docs = top.map((h) => ({
        stems: this.keywords.weightedStems(feedbackWords(texts.get(h.id) ?? "")),
        score: h.score,
      }));
      const idf = (stem: string): number => {
        const { chunks, df } = this.keywords.stemFrequency(stem);
        return Math.log(1 + chunks / (1 + df));
      };
      const expanded = expandWithFeedback(query, docs, idf);
      return this.boostTitles(
        this.keywords.scoreStems(expanded, topK, allowed).map((r) => ({ id: r.rowid, score: r.score })),
        expanded,
      );
    } catch (error) {
      logEvent("warn", "keyword_scorer_failed", { fallback: "FTS5 rank", cause: causeChain(error) });
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

  /** The BM25 ranking's head re-ranked with its documents' titles (title-boost.ts). */
  private boostTitles(hits: Scored<number>[], query: Map<string, number>): Scored<number>[] {
    // Only a document's first chunk can hold a title (leadingTitle): the others' texts are not read.
    const head = this.rowsByRowid(
      hits.slice(0, TITLE_BOOST.rerank).map((h) => h.id),
      "CASE WHEN position = 0 THEN text END AS text, position",
    );
    const titles = new Map<number, string[]>();
    for (const row of head) {
      const title = leadingTitle(row.text ?? "", row.position);
      if (title) titles.set(row.rowid, [...this.keywords.weightedStems(feedbackWords(title)).keys()]);
    }
    if (titles.size === 0) return hits;
    return boostTitles(
      hits,
      (rowid) => titles.get(rowid),
      query,
      (stem) => this.keywords.idfOf(stem),
    );
  }

  /** BM25 over FTS5, restricted by the filter (pseudo-relevance feedback reads this directly). */
  keywordSearch(text: string, options: { topK: number; filter?: FilterNode }): KeywordHit[] {
    const topK = Math.max(1, Math.min(MAX_TOP_K, Math.floor(options.topK)));
    // The first retrieval of the `expand_query` option: plain BM25, no feedback of its own.
    const rows = this.keywordRows(
      text,
      topK,
      options.filter,
      options.filter ? this.allowedRowids(options.filter) : undefined,
      false,
    );
    const info = this.rowsOf(
      rows.map((r) => r.id),
      options.filter !== undefined,
    );
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
  rowidsOfHits(hits: Scored[], allowed: Set<number> | undefined): Scored<number>[] {
    const rowidOf = new Map<string, number>();
    for (let i = 0; i < hits.length; i += IN_BATCH) {
      const part = hits.slice(i, i + IN_BATCH).map((h) => h.id);
      for (const r of this.sql.exec<{ rowid: number; id: string }>(
        `SELECT rowid, id FROM items WHERE id IN (${part.map(() => "?").join(",")})`,
        ...part,
      ))
        rowidOf.set(r.id, r.rowid);
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
  retrieve(request: RetrieveRequest): RetrieveResult {
    const allowed = request.filter ? this.allowedRowids(request.filter) : undefined;
    const perQuery = request.queries.map((query) => {
      let vector: Scored<number>[] = [];
      if (request.mode !== "keyword" && query.vector)
        vector = this.vectors
          .nearest(query.vector, request.depth, allowed)
          .map((r) => ({ id: r.rowid, score: r.score }));
      else if (request.mode !== "keyword" && query.vectorHits) vector = this.rowidsOfHits(query.vectorHits, allowed);
      // Feedback chunks come from BM25's own first pass: since feedback terms must be shared by
      // two feedback chunks (keyword-feedback.ts), choosing them from the pass fused with the
      // vector half measured lower (BENCHMARKS.md, third pass on quality).
      const keyword =
        request.mode !== "vector" ? this.keywordRows(query.text, request.depth, request.filter, allowed) : [];
      // Vector feedback (vector-feedback.ts): the query's embedding moved towards the top chunks
      // both halves agree on, searched once more. Only for the object's own vectors (Vectorize
      // answered before the call).
      if (request.mode === "hybrid" && query.vector && vector.length && keyword.length) {
        const top = fuseHalves(keyword, vector, request).slice(0, VECTOR_FEEDBACK.docs);
        const feedbackVectors = top
          .map((t) => this.vectors.valuesOf(t.id))
          .filter((v): v is number[] => v !== undefined);
        // Rescored over the candidates the two halves already found, not a second scan of every vector.
        const candidates = new Set([...vector, ...keyword].map((c) => c.id));
        if (feedbackVectors.length)
          vector = this.vectors
            .nearest(rocchio(query.vector, feedbackVectors), request.depth, candidates)
            .map((r) => ({ id: r.rowid, score: r.score }));
      }
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
      const rows = new Map(
        this.rowsByRowid(
          part.map((s) => s.id),
          "id, document_id, position, text, metadata",
        ).map((r) => [r.rowid, r]),
      );
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
  pageTexts(ranked: RankedChunk[]): [string, string][] {
    const pages = new Set(ranked.map(({ chunk }) => pageKey(chunk)));
    const texts = new Map<string, string>();
    for (const documentId of new Set(ranked.map(({ chunk }) => chunk.documentId))) {
      for (const row of this.sql.exec<Omit<ChunkRow, "rowid">>(
        "SELECT id, document_id, position, text, metadata FROM items WHERE document_id = ? ORDER BY position LIMIT 20000",
        documentId,
      )) {
        const chunk = toChunk(row);
        const key = pageKey(chunk);
        if (pages.has(key)) texts.set(key, texts.has(key) ? `${texts.get(key)}\n\n${chunk.text}` : chunk.text);
      }
    }
    return [...texts];
  }

  getChunks(ids: string[]): StoredChunk[] {
    const out: StoredChunk[] = [];
    for (let i = 0; i < ids.length; i += IN_BATCH) {
      const part = ids.slice(i, i + IN_BATCH);
      for (const r of this.sql.exec<Omit<ChunkRow, "rowid">>(
        `SELECT id, document_id, position, text, metadata FROM items WHERE id IN (${part.map(() => "?").join(",")})`,
        ...part,
      ))
        out.push(toChunk(r));
    }
    return out;
  }

  /** Every chunk of some documents, in order (retrieval_unit documents/pages, summaries). */
  documentChunks(documentIds: string[], limitPerDocument: number): StoredChunk[] {
    const out: StoredChunk[] = [];
    for (const documentId of documentIds) {
      for (const r of this.sql.exec<Omit<ChunkRow, "rowid">>(
        "SELECT id, document_id, position, text, metadata FROM items WHERE document_id = ? ORDER BY position LIMIT ?",
        documentId,
        limitPerDocument,
      ))
        out.push(toChunk(r));
    }
    return out;
  }
}
