import { DurableObject } from "cloudflare:workers";
import type { Env } from "../../../env";
import type { FilterNode } from "../metadata-filter";
import type { VectorMetadata } from "./vector-index";
import { vectorIndexFor } from "../vector-backend";
import { maxChunksPerKnowledgeBase } from "../../../lib/config";
import { resolveEmbedder } from "../embedders";
import { markDocumentIndexed, type StatementSpec } from "../documents.repository";
import type { KbDocumentRow } from "../../../db/schema/knowledge-bases";
import { VectorStore } from "./vector-store";
import { KeywordScorer } from "./keyword-scorer";
import { writeItemRows } from "./item-rows";
import { ChunkRetriever, type KeywordHit } from "./chunk-retriever";
import type { RetrieveRequest, RetrieveResult, StoredChunk } from "./retrieval";
import { WebSources, type StoredPage } from "../web-sources";
import type { WebSourceRecord } from "../web-ingestion";
import { setIsolateLogLevel } from "../../../lib/log";

import { KNOWLEDGE_BASE_INDEX_SCHEMA } from "./knowledge-base-index.schema";
import { applyMigrations, ownSchema } from "../../../durable-objects/sqlite-schema";
import { SmallDocumentWriter, type DocumentAnswer, type ItemInput } from "./small-document-writer";
import { storeOriginals } from "./original-rows";
import { ContentHashes } from "./content-hashes";
import { STEP_CHUNKS } from "./index-limits";
import { ShardStages, type StageKind, type StageOf } from "./shard-stages";
import { toWire, type WireResults } from "./stage-wire";
import {
  ShardSplitter,
  type CopiedChunk,
  type CopiedOriginal,
  type ShardConfig,
  type ShardSelf,
  type SplitProgress,
} from "./shard-splitter";
import { shardName, shardOf, type ShardMap } from "./shard-map";
import { readCopies, writeCopies } from "./shard-copies";
import { rpcStub, type RpcSurface } from "../../../durable-objects/rpc-stub";
import { Replication } from "./replication";
import type { ReplicaChanges, ReplicaHead } from "./replicas";

type KnowledgeBaseIndexPeer = RpcSurface<KnowledgeBaseIndex>;
import { WARM_MIN_CHUNKS, warmed } from "./postings-warmer";

/** How long after a failed D1 report the alarm retries it. */
const RESUME_AFTER_MS = 30_000;

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
  /** Documents whose chunks leave the index in the transaction that stores this one's last chunks. */
  replaces?: string[];
}

/** A small document sent whole: its chunks and the D1 row the object writes once they are searchable. */
export interface DocumentJob extends IngestJob {
  row: KbDocumentRow;
  /** The original file when it is small enough to be kept beside the chunks rather than in R2 (its row's r2Key is then null). */
  original?: Uint8Array;
}

/** Sent back instead of throwing, since a thrown error loses its code across RPC. */
export type IngestResult =
  | { status: "ready"; chunks: number }
  | { status: "indexing"; remaining: number }
  | { status: "failed"; error: string };

/**
 * One per knowledge base. Its SQLite holds the chunks (text, document id, metadata JSON), an FTS5
 * keyword index over them (scored by KeywordScorer) and their vectors (VectorStore: int8, packed
 * many per row, scanned with SIMD in memory). A query's whole retrieval runs here in one call
 * (retrieve, by ChunkRetriever); this class owns the writes. Large documents are ingested in steps: pending chunks wait in SQLite and the alarm
 * continues.
 */
export class KnowledgeBaseIndex extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly vectors: VectorStore;
  private readonly keywords: KeywordScorer;
  private readonly retriever: ChunkRetriever;
  private readonly web: WebSources;
  private readonly writer: SmallDocumentWriter;
  private readonly hashes: ContentHashes;
  private readonly stages: ShardStages;
  private readonly splitter: ShardSplitter;
  /** Whether this instance has looked for an unfinished warm pass (an index warmed before, or never). */
  private warmChecked = false;
  /** Alternates the alarm between a split step and an indexing step while both have work. */
  private splitTurn = false;
  /** The checks after a write (split, warm pass, replicas), with the writer's commit count when they started. */
  private afterWrite: { commits: number; done: Promise<void> } | undefined;
  private readonly replication: Replication;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    setIsolateLogLevel(env.LOG_LEVEL);
    this.sql = ctx.storage.sql;
    this.vectors = new VectorStore(this.sql);
    this.keywords = new KeywordScorer(ctx.storage);
    this.retriever = new ChunkRetriever(this.sql, this.vectors, this.keywords);
    ownSchema(ctx, KNOWLEDGE_BASE_INDEX_SCHEMA);
    this.stages = new ShardStages(this.vectors, this.keywords, this.retriever, () => this.indexingBacklog());
    this.splitter = new ShardSplitter({
      sql: this.sql,
      storage: ctx.storage,
      env,
      readDocuments: (ids) => readCopies(this.sql, this.vectors, ids),
      readOriginals: (ids) =>
        ids.flatMap((documentId) =>
          this.sql
            .exec<{ bytes: ArrayBuffer }>("SELECT bytes FROM originals WHERE document_id = ?", documentId)
            .toArray()
            .map((r) => ({ documentId, bytes: new Uint8Array(r.bytes) })),
        ),
      removeDocuments: (ids) => {
        this.removeRowsOf(ids);
      },
      peer: (kbId, index) => this.peer(kbId, index),
    });
    this.hashes = new ContentHashes(this.sql);
    this.writer = new SmallDocumentWriter({
      hashes: this.hashes,
      sql: this.sql,
      storage: ctx.storage,
      env,
      upsertItems: (items) => this.upsertItems(items),
      storeOriginals: (originals) => storeOriginals(this.sql, originals),
    });
    this.replication = new Replication({
      sql: this.sql,
      storage: ctx.storage,
      env,
      readDocuments: (ids) => readCopies(this.sql, this.vectors, ids),
      backlog: () => this.indexingBacklog(),
      removeForCopy: (ids, chunks) => this.removeForCopy(ids, chunks),
      writeCopies: (chunks) => {
        this.hashes.markIncomplete();
        writeCopies(this.sql, this.keywords, this.vectors, chunks);
      },
      reset: () => this.destroy(),
      waitUntil: (promise) => this.ctx.waitUntil(promise),
    });
    this.web = new WebSources(this.sql, env, {
      ingest: (job, options) => this.ingest(job, options),
      deleteDocuments: (ids) => this.deleteDocuments(ids),
    });
  }

  // ---------- items ----------

  private upsertItems(items: ItemInput[]): number[] {
    this.keywords.invalidate();
    this.splitter.touched([...new Set(items.flatMap((i) => (i.documentId === null ? [] : [i.documentId])))]);
    this.replication.log.touched(items.map((i) => i.documentId));
    const { rowids, lengths, vectors } = writeItemRows(this.sql, items);
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

  // ---------- RPC: retrieval (ChunkRetriever) ----------

  /** BM25 over FTS5, restricted by the filter (pseudo-relevance feedback reads this directly). */
  async keywordSearch(text: string, options: { topK: number; filter?: FilterNode }): Promise<KeywordHit[]> {
    return this.retriever.keywordSearch(text, options);
  }

  /** A query's whole retrieval in one call (see ChunkRetriever.retrieve). */
  async retrieve(request: RetrieveRequest): Promise<RetrieveResult> {
    if (!this.warmChecked) {
      this.warmChecked = true;
      await this.scheduleWarm();
    }
    const result = this.retriever.retrieve(request);
    const backlog = this.indexingBacklog();
    return backlog.chunks > 0 ? { ...result, indexing: backlog } : result;
  }

  async getChunks(ids: string[]): Promise<StoredChunk[]> {
    return this.retriever.getChunks(ids);
  }

  /** Every chunk of some documents, in order (retrieval_unit documents/pages, summaries). */
  async documentChunks(documentIds: string[], limitPerDocument: number): Promise<StoredChunk[]> {
    return this.retriever.documentChunks(documentIds, limitPerDocument);
  }

  /** Removes documents' chunks, keyword entries, vectors and any pending steps. */
  async deleteDocuments(documentIds: string[]): Promise<{ chunks: string[] }> {
    const removed: string[] = [];
    this.ctx.storage.transactionSync(() => {
      this.splitter.touched(documentIds);
      removed.push(...this.removeRowsOf(documentIds));
      for (const documentId of documentIds) {
        this.sql.exec("DELETE FROM pending WHERE document_id = ?", documentId);
        this.sql.exec("DELETE FROM finished WHERE document_id = ?", documentId);
        this.sql.exec("DELETE FROM originals WHERE document_id = ?", documentId);
      }
    });
    // Documents another shard owns now (a split this caller had not seen): deleted there too.
    for (const [index, ids] of this.elsewhere(documentIds, (id) => id)) {
      const { chunks } = await this.peerOf(index).deleteDocuments(ids);
      removed.push(...chunks);
    }
    await this.scheduleWarm();
    await this.replication.announce();
    return { chunks: removed };
  }

  /** A small document's original file, kept here instead of in R2 (null for any other document). */
  async original(documentId: string): Promise<Uint8Array | null> {
    const row = this.sql
      .exec<{ bytes: ArrayBuffer }>("SELECT bytes FROM originals WHERE document_id = ?", documentId)
      .toArray()[0];
    return row ? new Uint8Array(row.bytes) : null;
  }

  /** Removes some documents' chunks, keyword entries and vectors (inside the caller's transaction). */
  private removeRowsOf(documentIds: string[]): string[] {
    this.replication.log.touched(documentIds);
    this.hashes.remove(documentIds);
    const removed: string[] = [];
    for (const documentId of documentIds) {
      const rows = this.sql
        .exec<{ rowid: number; id: string }>("SELECT rowid, id FROM items WHERE document_id = ?", documentId)
        .toArray();
      if (rows.length) this.deleteRows(rows.map((r) => r.rowid));
      removed.push(...rows.map((r) => r.id));
      // A small original leaves with its chunks (deleted, or moved to another shard by a split).
      this.sql.exec("DELETE FROM originals WHERE document_id = ?", documentId);
    }
    return removed;
  }

  /** Drops everything this knowledge base holds. */
  async destroy(): Promise<void> {
    await this.replication.destroyMembers();
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    this.replication.log.forget();
    this.splitter.forget();
    this.hashes.forget();
    applyMigrations(this.ctx.storage, KNOWLEDGE_BASE_INDEX_SCHEMA);
    this.keywords.forget();
    this.vectors.unload();
  }

  async stats(): Promise<{ chunks: number; vectors: number; dimensions: number; pending: number }> {
    const chunks = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n;
    const pending = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n;
    return { chunks, vectors: this.vectors.size, dimensions: this.vectors.dims, pending };
  }

  /** Chunks held or queued by the shards other than the one that owns `documentId` (shard 0 keeps the map). */
  private async heldBesides(documentId: string): Promise<number> {
    const map = this.splitter.self().index === 0 ? this.splitter.map() : undefined;
    if (!map || map.shards.length === 1) return 0;
    const owner = shardOf(map, documentId).index;
    const counts = await Promise.all(
      map.shards
        .filter((s) => s.index !== owner)
        .map((s) => (s.index === 0 ? this.stats() : this.peerOf(s.index).stats())),
    );
    return counts.reduce((a, c) => a + c.chunks + c.pending, 0);
  }

  // ---------- RPC: ingestion in steps ----------

  /**
   * Queues a document's chunks and runs the first step now. A document that does not finish in
   * one step is continued by the alarm; every step commits before the next starts, so a restart
   * resumes where it stopped.
   */
  async ingest(
    job: IngestJob,
    asked: { reset: boolean; start: boolean; total?: number; heldElsewhere?: number },
  ): Promise<IngestResult> {
    this.splitter.noteKb(job.kbId);
    // A write that starts here without the Worker's count (a web page: shard 0 crawls for the whole
    // base) learns what the other shards hold, so KB_MAX_CHUNKS is the base's limit on this path too.
    const options =
      asked.reset && asked.total !== undefined && asked.heldElsewhere === undefined
        ? { ...asked, heldElsewhere: await this.heldBesides(job.documentId) }
        : asked;
    const owner = this.splitter.elsewhere(job.documentId);
    if (owner !== undefined) return this.peerOf(owner).ingest(job, options);
    if (options.reset && options.total !== undefined) {
      // Capacity is checked before anything is queued, so a refused document leaves nothing behind.
      const limit = maxChunksPerKnowledgeBase(this.env);
      const held =
        (options.heldElsewhere ?? 0) +
        this.sql
          .exec<{ n: number }>(
            "SELECT (SELECT count(*) FROM items WHERE document_id IS NOT ? ) + (SELECT count(*) FROM pending WHERE document_id != ?) AS n",
            job.documentId,
            job.documentId,
          )
          .one().n;
      if (held + options.total > limit)
        return {
          status: "failed",
          error: `the knowledge base holds ${held} chunk${held === 1 ? "" : "s"} and this document gives ${options.total}; the limit is ${limit} chunks per knowledge base (KB_MAX_CHUNKS)`,
        };
    }
    this.ctx.storage.transactionSync(() => {
      // Documents in steps, web pages and outside sources come without a content hash: from now
      // on the Worker asks D1 about duplicates for this base (content-hashes.ts).
      this.hashes.markIncomplete();
      if (options.reset && job.replaces?.length)
        this.sql.exec(
          "INSERT OR REPLACE INTO replacements (document_id, replaces) VALUES (?, ?)",
          job.documentId,
          JSON.stringify(job.replaces),
        );
      this.queueChunks(job, options.reset);
    });
    if (!options.start) return { status: "indexing", remaining: job.chunks.length };
    const result = await this.step(job.documentId);
    if (result.status === "indexing" || this.splitter.wantsStep()) await this.ctx.storage.setAlarm(Date.now());
    else await this.scheduleWarm();
    await this.replication.announce();
    return result;
  }

  // ---------- RPC: small documents, coalesced (SmallDocumentWriter) ----------

  /** See SmallDocumentWriter.ingest. */
  async ingestDocuments(jobs: DocumentJob[], audit?: StatementSpec, heldElsewhere = 0): Promise<IngestResult[]> {
    return (await this.writeDocuments(jobs, audit, heldElsewhere, false)) as IngestResult[];
  }

  /**
   * After small documents are written: a split or warm pass due, and the replicas told. Every call a
   * batch answered arrives here at once (8 with 8 requests in flight), so they share one run of the
   * checks (each a few statements, one counting the items) that started after their batch committed.
   */
  private checkAfterWrite(): Promise<void> {
    const commits = this.writer.commits;
    if (this.afterWrite && this.afterWrite.commits >= commits) return this.afterWrite.done;
    const run = async (): Promise<void> => {
      if (this.splitter.wantsStep()) await this.ctx.storage.setAlarm(Date.now());
      else await this.scheduleWarm();
      await this.replication.announce();
    };
    const done = run();
    const current = { commits, done };
    this.afterWrite = current;
    // A later batch's callers start their own run; a failed run is not shared after it failed.
    void done.then(
      () => undefined,
      () => {
        if (this.afterWrite === current) this.afterWrite = undefined;
      },
    );
    return done;
  }

  /**
   * ingestDocuments, and `check`: de-duplication answered here (SmallDocumentWriter.ingest) for
   * a caller that did not ask D1; while documents of the call belong to another shard (a split the
   * caller had not seen), every one answers `unchecked` and nothing is written.
   */
  private async writeDocuments(
    jobs: DocumentJob[],
    audit: StatementSpec | undefined,
    heldElsewhere: number,
    check: boolean,
  ): Promise<DocumentAnswer[]> {
    if (jobs[0]) this.splitter.noteKb(jobs[0].kbId);
    const forwarded = this.elsewhere(jobs, (j) => j.documentId);
    if (forwarded.size === 0) {
      const results = await this.writer.ingest(jobs, audit, heldElsewhere, check);
      await this.checkAfterWrite();
      return results;
    }
    if (check) return jobs.map(() => ({ status: "unchecked" }));
    // Some documents belong to another shard now (a split this caller had not seen): each part goes to its owner.
    const results = new Map<DocumentJob, IngestResult>();
    const mine = jobs.filter((j) => this.splitter.elsewhere(j.documentId) === undefined);
    const parts: [KnowledgeBaseIndexPeer | null, DocumentJob[]][] = [
      [null, mine],
      ...[...forwarded].map(([index, list]): [KnowledgeBaseIndexPeer, DocumentJob[]] => [this.peerOf(index), list]),
    ];
    let first = true;
    for (const [peer, list] of parts) {
      if (list.length === 0) continue;
      const out = peer
        ? await peer.ingestDocuments(list, first ? audit : undefined, heldElsewhere)
        : ((await this.writer.ingest(list, audit, heldElsewhere)) as IngestResult[]);
      first = false;
      list.forEach((job, i) => results.set(job, out[i]));
    }
    return jobs.map(
      (j) => results.get(j) ?? { status: "failed", error: "indexing failed: no shard took this document" },
    );
  }

  /**
   * Shard 0's: ingestDocuments for a knowledge base that never split, else its map (for the Worker
   * to send each document to its shard). One call instead of reading the map first: a small
   * document's request is mostly fixed costs like that round trip (issue 14). With `check`, the
   * de-duplication is answered here too (see writeDocuments).
   */
  async ingestDocumentsOrMap(
    jobs: DocumentJob[],
    audit?: StatementSpec,
    check = false,
  ): Promise<{ results: DocumentAnswer[] } | { map: ShardMap }> {
    const map = this.splitter.map();
    return map.shards.length > 1 ? { map } : { results: await this.writeDocuments(jobs, audit, 0, check) };
  }

  // ---------- RPC: shards (shard-map.ts, shard-stages.ts, shard-splitter.ts) ----------

  /** The knowledge base's shard map (kept by shard 0). */
  async shardMap(): Promise<ShardMap> {
    return this.splitter.map();
  }

  /** One call for a knowledge base that never split (the answer), else its map, for the Worker to scatter the query. */
  async retrieveOrMap(request: RetrieveRequest): Promise<{ result: RetrieveResult } | { map: ShardMap }> {
    const map = this.splitter.map();
    return map.shards.length > 1 ? { map } : { result: await this.retrieve(request) };
  }

  /** One step of a sharded query, for the caller's view of this shard's range (stale: read the map again). */
  async stage<K extends StageKind>(
    range: { lo: number; hi: number },
    request: StageOf<K>,
  ): Promise<{ stale: true } | { stale: false; result: WireResults[K] }> {
    if (this.splitter.check(range) === "stale") return { stale: true };
    return { stale: false, result: toWire(request.kind, this.stages.run(request)) };
  }

  async initShard(self: ShardSelf): Promise<void> {
    this.splitter.init(self);
  }

  async allocateShard(): Promise<number> {
    return this.splitter.allocate();
  }

  async commitSplit(from: number, to: number, mid: number): Promise<ShardMap> {
    return this.splitter.commit(from, to, mid);
  }

  /** Test hook and operator control: when this shard splits (and whether only splitStep runs it). */
  async configureSharding(config: ShardConfig): Promise<void> {
    this.splitter.configure(config);
    if (this.splitter.wantsStep()) await this.ctx.storage.setAlarm(Date.now());
  }

  /** Runs one step of this shard's split (the alarm runs them unless the shard is configured manual). */
  async splitStep(): Promise<SplitProgress> {
    return this.splitter.step();
  }

  /** Chunks a split copies here: each document's chunks replace what this shard held of it (shard-copies.ts). */
  async acceptCopies(documentIds: string[], chunks: CopiedChunk[], originals: CopiedOriginal[] = []): Promise<void> {
    this.ctx.storage.transactionSync(() => {
      this.hashes.markIncomplete();
      this.removeRowsOf(documentIds);
      writeCopies(this.sql, this.keywords, this.vectors, chunks);
      for (const o of originals)
        this.sql.exec("INSERT OR REPLACE INTO originals (document_id, bytes) VALUES (?, ?)", o.documentId, o.bytes);
    });
  }

  // ---------- RPC: read replicas (replication.ts) ----------

  /** Primary: its version and backlog, whether the caller's range is stale, and the map when it has several shards. */
  async replicaHead(
    self: string,
    range?: { lo: number; hi: number },
  ): Promise<ReplicaHead & { stale: boolean; map: ShardMap | null }> {
    const stale = range !== undefined && this.splitter.check(range) === "stale";
    const map = range === undefined ? this.splitter.map() : null;
    return { ...this.replication.head(self), stale, map: map && map.shards.length > 1 ? map : null };
  }

  /** Primary: the documents changed since a replica's position, as exact copies. */
  async replicaChanges(
    self: string,
    since: { epoch: string; version: number } | null,
    replica: string,
  ): Promise<ReplicaChanges> {
    return this.replication.changes(self, since, replica);
  }

  /** Replica: pull from the primary until current. */
  async replicaSync(primary: string, self: string): Promise<void> {
    await this.replication.sync(primary, self);
    // A large replica reads its posting lists ahead of queries too, as its primary does.
    await this.scheduleWarm();
  }

  /** Replica: retrieveOrMap, or `behind` when its copy is not at the primary's version. */
  async replicaRetrieveOrMap(
    primary: string,
    self: string,
    request: RetrieveRequest,
  ): Promise<{ behind: true } | { result: RetrieveResult } | { map: ShardMap }> {
    const head = await rpcStub<KnowledgeBaseIndex>(this.env.KB_INDEX, primary).replicaHead(primary);
    if (head.map) return { map: head.map };
    if (!this.replication.check(head, primary, self)) return { behind: true };
    const result = this.retriever.retrieve(request);
    return { result: head.backlog.chunks > 0 ? { ...result, indexing: head.backlog } : result };
  }

  /** Replica: one step of a sharded query (see stage), or `behind`. */
  async replicaStage<K extends StageKind>(
    primary: string,
    self: string,
    range: { lo: number; hi: number },
    request: StageOf<K>,
  ): Promise<{ behind: true } | { stale: true } | { stale: false; result: WireResults[K] }> {
    const head = await rpcStub<KnowledgeBaseIndex>(this.env.KB_INDEX, primary).replicaHead(primary, range);
    if (head.stale) return { stale: true };
    if (!this.replication.check(head, primary, self)) return { behind: true };
    const stages = new ShardStages(this.vectors, this.keywords, this.retriever, () => head.backlog);
    return { stale: false, result: toWire(request.kind, stages.run(request)) };
  }

  /** Reads answered as a replica and refused as behind (tests and operators). */
  async replicaStats(): Promise<{ served: number; behind: number }> {
    return { ...this.replication.counts };
  }

  /** Replica: before exact copies land, their documents' rows and any row on their rowids or ids go. */
  private removeForCopy(documentIds: string[], chunks: CopiedChunk[]): void {
    this.removeRowsOf(documentIds);
    const clash = new Set<number>();
    for (const c of chunks)
      for (const r of this.sql.exec<{ rowid: number }>(
        "SELECT rowid FROM items WHERE rowid = ? OR id = ?",
        c.rowid,
        c.id,
      ))
        clash.add(r.rowid);
    if (clash.size) this.deleteRows([...clash]);
  }

  private peer(kbId: string, index: number): KnowledgeBaseIndexPeer {
    return rpcStub(this.env.KB_INDEX, shardName(kbId, index));
  }

  private peerOf(index: number): KnowledgeBaseIndexPeer {
    const kbId = this.splitter.self().kbId;
    if (kbId === null) throw new Error("this shard does not know its knowledge base");
    return this.peer(kbId, index);
  }

  /** Items whose document another shard owns now, by that shard. */
  private elsewhere<T>(items: T[], documentOf: (item: T) => string): Map<number, T[]> {
    const out = new Map<number, T[]>();
    for (const item of items) {
      const index = this.splitter.elsewhere(documentOf(item));
      if (index === undefined) continue;
      out.set(index, [...(out.get(index) ?? []), item]);
    }
    return out;
  }

  private queueChunks(job: IngestJob, reset: boolean): void {
    if (reset) this.sql.exec("DELETE FROM pending WHERE document_id = ?", job.documentId);
    for (const chunk of job.chunks) {
      this.sql.exec(
        "INSERT OR REPLACE INTO pending (document_id, position, kb_id, model, chunk) VALUES (?, ?, ?, ?, ?)",
        job.documentId,
        chunk.position,
        job.kbId,
        job.embeddingModel,
        JSON.stringify(chunk),
      );
    }
  }

  /** Chunks indexed and in all for documents still indexing (the documents route's progress). */
  async progress(documentIds: string[]): Promise<{ documentId: string; chunksIndexed: number; chunksTotal: number }[]> {
    return documentIds.map((documentId) => {
      const indexed = this.documentChunkCount(documentId);
      const pending = this.sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM pending WHERE document_id = ?", documentId)
        .one().n;
      return { documentId, chunksIndexed: indexed, chunksTotal: indexed + pending };
    });
  }

  /** What is not searchable yet: documents with chunks still queued, and those chunks. */
  private indexingBacklog(): { documents: number; chunks: number } {
    return this.sql
      .exec<{ documents: number; chunks: number }>(
        "SELECT count(DISTINCT document_id) AS documents, count(*) AS chunks FROM pending",
      )
      .one();
  }

  private async step(documentId: string): Promise<IngestResult> {
    const rows = this.sql
      .exec<{ position: number; kb_id: string; model: string; chunk: string }>(
        "SELECT position, kb_id, model, chunk FROM pending WHERE document_id = ? ORDER BY position LIMIT ?",
        documentId,
        STEP_CHUNKS,
      )
      .toArray();
    if (rows.length === 0) return { status: "ready", chunks: this.documentChunkCount(documentId) };
    try {
      const embedder = await resolveEmbedder(this.env, rows[0].model);
      const chunks = rows.map((r) => JSON.parse(r.chunk) as ChunkInput);
      const vectors = await embedder.embed(chunks.map((c) => c.text));
      const backend = vectorIndexFor(this.env, rows[0].kb_id);
      let replaced: string[] = [];
      this.ctx.storage.transactionSync(() => {
        this.upsertItems(
          chunks.map((c, i) => ({
            id: c.id,
            documentId: c.documentId,
            position: c.position,
            text: c.text,
            metadata: c.metadata,
            values: backend ? undefined : vectors[i],
          })),
        );
        this.sql.exec(
          "DELETE FROM pending WHERE document_id = ? AND position <= ?",
          documentId,
          rows[rows.length - 1].position,
        );
        replaced = this.dropReplaced(documentId);
      });
      if (backend) await backend.upsert(chunks.map((c, i) => ({ id: c.id, values: vectors[i], metadata: c.metadata })));
      if (backend && replaced.length) await backend.deleteByIds(replaced);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.sql.exec("DELETE FROM pending WHERE document_id = ?", documentId);
      this.sql.exec("DELETE FROM replacements WHERE document_id = ?", documentId);
      return { status: "failed", error: `indexing failed: ${message}` };
    }
    const left = this.sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM pending WHERE document_id = ?", documentId)
      .one().n;
    return left > 0
      ? { status: "indexing", remaining: left }
      : { status: "ready", chunks: this.documentChunkCount(documentId) };
  }

  /**
   * Inside step()'s transaction: once a document has no pending chunks left, the documents it
   * replaces leave the index in that same transaction, so a query sees either the old page or the
   * new one. Answers the chunk ids removed.
   */
  private dropReplaced(documentId: string): string[] {
    const left = this.sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM pending WHERE document_id = ?", documentId)
      .one().n;
    const row = this.sql
      .exec<{ replaces: string }>("SELECT replaces FROM replacements WHERE document_id = ?", documentId)
      .toArray()[0];
    if (left > 0 || !row) return [];
    this.sql.exec("DELETE FROM replacements WHERE document_id = ?", documentId);
    const removed: string[] = [];
    this.splitter.touched(JSON.parse(row.replaces) as string[]);
    this.replication.log.touched(JSON.parse(row.replaces) as string[]);
    for (const old of JSON.parse(row.replaces) as string[]) {
      const rows = this.sql
        .exec<{ rowid: number; id: string }>("SELECT rowid, id FROM items WHERE document_id = ?", old)
        .toArray();
      this.deleteRows(rows.map((r) => r.rowid));
      removed.push(...rows.map((r) => r.id));
    }
    return removed;
  }

  private documentChunkCount(documentId: string): number {
    return this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items WHERE document_id = ?", documentId).one().n;
  }

  // ---------- RPC: web sources (url_data) ----------

  /** Web sources kept (crawling or re-scraped), checked against MAX_WEB_SOURCES before a new one. */
  async webSourceCount(): Promise<number> {
    return this.web.count();
  }

  /** Keeps a web source whose crawl continues or that is re-scraped, and schedules its next step. */
  async registerWebSource(record: WebSourceRecord, pages: StoredPage[]): Promise<void> {
    this.web.register(record, pages, Date.now());
    await this.scheduleNext();
  }

  /**
   * Continues pending documents one step at a time, then web crawls a few pages at a time, then
   * starts due rescrapes; safe to run twice.
   */
  override async alarm(): Promise<void> {
    await this.writer.reportFinished();
    const next = this.sql
      .exec<{ document_id: string; kb_id: string }>("SELECT document_id, kb_id FROM pending ORDER BY rowid LIMIT 1")
      .toArray()[0];
    // A split takes every other alarm while documents are still indexing, so a shard that keeps
    // receiving large documents still splits instead of growing past its threshold without bound.
    this.splitTurn = !this.splitTurn;
    if (this.splitter.wantsStep() && (!next || this.splitTurn)) {
      await this.splitter.step();
    } else if (next) {
      const result = await this.step(next.document_id);
      // A small document whose batch never committed: its row goes to D1 with the outcome, as the batch would have.
      const queued =
        this.sql.exec("SELECT 1 FROM finished WHERE document_id = ?", next.document_id).toArray().length > 0;
      if (result.status !== "indexing" && queued) {
        this.sql.exec(
          "UPDATE finished SET outcome = ? WHERE document_id = ?",
          JSON.stringify(result),
          next.document_id,
        );
        await this.writer.reportFinished();
      } else if (result.status !== "indexing") await markDocumentIndexed(this.env, next.document_id, result);
    } else {
      await this.web.step(Date.now());
      // Idle otherwise: one slice of reading posting lists ahead of queries (postings-warmer.ts).
      if (!this.web.crawling() && this.needsWarm()) this.warmPostings();
    }
    await this.replication.announce();
    await this.scheduleNext();
  }

  /** One slice of the warm pass (postings-warmer.ts); answers whether every term is read. The alarm runs it; tests call it on small indexes. */
  warmPostings(sliceRows?: number): boolean {
    return this.keywords.warmStep(sliceRows);
  }

  /** A large index whose posting lists are not all read since the last write (small ones read fast enough on demand). */
  private needsWarm(): boolean {
    if (warmed(this.sql)) return false;
    // max(rowid) is one index lookup and at least the chunk count (rowids are dense).
    const top = this.sql.exec<{ n: number | null }>("SELECT max(rowid) AS n FROM items").one().n ?? 0;
    return top >= WARM_MIN_CHUNKS;
  }

  /** After a write (or on first use): the alarm runs now if a warm pass is due and nothing sooner is set. */
  private async scheduleWarm(): Promise<void> {
    if (!this.needsWarm()) return;
    const at = await this.ctx.storage.getAlarm();
    if (at === null || at > Date.now()) await this.ctx.storage.setAlarm(Date.now());
  }

  /** The alarm runs at once while chunks are pending or a crawl is in progress, else when the next rescrape is due. */
  private async scheduleNext(): Promise<void> {
    const pending = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n;
    if (pending > 0 || this.web.crawling() || this.splitter.wantsStep() || this.needsWarm())
      return this.ctx.storage.setAlarm(Date.now());
    const unreported = this.sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM finished WHERE outcome IS NOT NULL")
      .one().n;
    if (unreported > 0) return this.ctx.storage.setAlarm(Date.now() + RESUME_AFTER_MS);
    const due = this.web.nextDue();
    if (due !== null) await this.ctx.storage.setAlarm(due);
  }
}
