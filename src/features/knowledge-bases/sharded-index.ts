import type { Env } from "../../env";
import { rpcStub, type RpcSurface } from "../../durable-objects/rpc-stub";
import type { FilterNode } from "./metadata-filter";
import type { DocumentJob, IngestJob, IngestResult, KnowledgeBaseIndex } from "./index/knowledge-base-index";
import type { StatementSpec } from "./documents.repository";
import type { RetrieveRequest, RetrieveResult, StoredChunk } from "./index/retrieval";
import type { KeywordHit } from "./index/chunk-retriever";
import type { DocumentAnswer } from "./index/hash-check";
import type { WebSourceRecord } from "./web-ingestion";
import type { StoredPage } from "./web-sources";
import { groupByShard, shardName, shardOf, type ShardMap } from "./index/shard-map";
import { askShards, ShardScatter, StaleShardMap, type MissingShard } from "./shard-scatter";
import { ShardedRetrieval } from "./sharded-retrieval";
import { pickCopy, replicaOf } from "./shard-replicas";
import { causeChain, logEvent } from "../../lib/log";

type IndexRpc = RpcSurface<KnowledgeBaseIndex>;

/** A sharded answer that could not ask every shard names the ones it lacks. */
export type ShardedRetrieveResult = RetrieveResult & { partial?: { missing: MissingShard[] } };

/** A read over several shards: what the shards that answered hold, and the ones that did not (empty when none). */
export type ShardedRead<K extends string, T> = { [key in K]: T } & { missing: MissingShard[] };

/**
 * The shard maps of sharded knowledge bases this isolate queried, so a query goes straight to the
 * shards instead of asking shard 0 for the map first. Safe because every step of a query carries
 * the range it expects of each shard and a shard whose range changed answers `stale` (a split
 * changes the splitting shard's range), after which the query reads the map again. Maps only
 * grow, so a base seen sharded stays sharded. Bounded; the oldest entry leaves first.
 */
const knownMaps = new Map<string, ShardMap>();
const KNOWN_MAPS = 512;

function rememberMap(kbId: string, map: ShardMap): ShardMap {
  knownMaps.delete(kbId);
  if (map.shards.length > 1) knownMaps.set(kbId, map);
  if (knownMaps.size > KNOWN_MAPS) knownMaps.delete(knownMaps.keys().next().value ?? "");
  return map;
}

/** Times a query starts over after finding its shard map stale (a split finished under it). */
const STALE_RETRIES = 3;

/**
 * A knowledge base's index as the Worker sees it, over however many shards it has (shard-map.ts):
 * writes go to the shard that owns each document, reads that name documents go to their shards,
 * and queries go to shard 0 alone while the base has one shard (one call, as before sharding) or
 * to every shard, merged exactly (sharded-retrieval.ts).
 */
export class ShardedKnowledgeBaseIndex {
  constructor(
    private readonly env: Env,
    private readonly kbId: string,
    private readonly timeoutMs?: number,
  ) {}

  private shard(index: number): IndexRpc {
    return rpcStub(this.env.KB_INDEX, shardName(this.kbId, index));
  }

  private async map(): Promise<ShardMap> {
    return rememberMap(this.kbId, await this.shard(0).shardMap());
  }

  private async chunksElsewhere(map: ShardMap, except: number): Promise<number> {
    if (map.shards.length === 1) return 0;
    const counts = await Promise.all(
      map.shards.filter((s) => s.index !== except).map((s) => this.shard(s.index).stats()),
    );
    return counts.reduce((a, c) => a + c.chunks + c.pending, 0);
  }

  async retrieve(request: RetrieveRequest): Promise<ShardedRetrieveResult> {
    let map = knownMaps.get(this.kbId);
    if (!map) {
      const first = (await this.fromReplica(request)) ?? (await this.shard(0).retrieveOrMap(request));
      if ("result" in first) return first.result;
      map = rememberMap(this.kbId, first.map);
    }
    for (let attempt = 0; ; attempt++) {
      const scatter = new ShardScatter(this.env, this.kbId, map, this.timeoutMs);
      try {
        const result = await new ShardedRetrieval(scatter).retrieve(request);
        logEvent("debug", "knowledge_base_sharded_query", {
          shards: map.shards.length,
          calls: scatter.steps.reduce((n, s) => n + s.calls, 0),
          steps: scatter.steps.map((s) => `${s.kind}:${s.calls}`).join(" "),
        });
        const missing = scatter.missingShards();
        return missing.length ? { ...result, partial: { missing } } : result;
      } catch (error) {
        if (!(error instanceof StaleShardMap) || attempt >= STALE_RETRIES) throw error;
        map = await this.map();
      }
    }
  }

  /** A query of a one-shard base from one of shard 0's replicas, or undefined: ask the primary. */
  private async fromReplica(
    request: RetrieveRequest,
  ): Promise<{ result: RetrieveResult } | { map: ShardMap } | undefined> {
    const copy = pickCopy(this.env);
    if (copy === 0) return undefined;
    const replica = replicaOf(this.env, shardName(this.kbId, 0), copy);
    try {
      const answer = await replica.stub.replicaRetrieveOrMap(replica.primary, replica.self, request);
      return "behind" in answer ? undefined : answer;
    } catch (error) {
      logEvent("warn", "knowledge_base_replica_failed", { replica: copy, cause: causeChain(error) });
      return undefined;
    }
  }

  /** Plain BM25 top hits (pseudo-relevance feedback reads them); a failing shard is named in `missing`. */
  async keywordSearch(
    text: string,
    options: { topK: number; filter?: FilterNode },
  ): Promise<ShardedRead<"hits", KeywordHit[]>> {
    let map = knownMaps.get(this.kbId);
    for (let attempt = 0; ; attempt++) {
      map ??= await this.map();
      if (map.shards.length === 1) return { hits: await this.shard(0).keywordSearch(text, options), missing: [] };
      const scatter = new ShardScatter(this.env, this.kbId, map, this.timeoutMs);
      try {
        const hits = await new ShardedRetrieval(scatter).keywordSearch(text, options);
        return { hits, missing: scatter.missingShards() };
      } catch (error) {
        if (!(error instanceof StaleShardMap) || attempt >= STALE_RETRIES) throw error;
        map = undefined;
      }
    }
  }

  /** Chunks by id from whichever shard holds them; shards that fail are named in `missing`. */
  async getChunks(ids: string[]): Promise<ShardedRead<"chunks", StoredChunk[]>> {
    const map = await this.map();
    if (map.shards.length === 1) return { chunks: await this.shard(0).getChunks(ids), missing: [] };
    const { answers, missing } = await askShards(
      map.shards.map((s) => s.index),
      (index) => this.shard(index).getChunks(ids),
      "getChunks",
      this.timeoutMs,
    );
    const seen = new Set<string>();
    const chunks = answers.flatMap(([, list]) => list).filter((c) => !seen.has(c.id) && seen.add(c.id) !== undefined);
    return { chunks, missing };
  }

  /** Documents' chunks from their shards; a document whose shard fails has none, and that shard is in `missing`. */
  async documentChunks(documentIds: string[], limitPerDocument: number): Promise<ShardedRead<"chunks", StoredChunk[]>> {
    const map = await this.map();
    const groups = groupByShard(map, documentIds, (d) => d);
    const { answers, missing } = await askShards(
      [...groups.keys()],
      (index) => this.shard(index).documentChunks(groups.get(index) ?? [], limitPerDocument),
      "documentChunks",
      this.timeoutMs,
    );
    const byDocument = new Map(documentIds.map((d): [string, StoredChunk[]] => [d, []]));
    for (const [, list] of answers) for (const c of list) byDocument.get(c.documentId)?.push(c);
    return { chunks: [...byDocument.values()].flat(), missing };
  }

  /** How many index objects (shards) hold the knowledge base's chunks now. */
  async shardCount(): Promise<number> {
    return (await this.map()).shards.length;
  }

  /** A small document's original, from the shard that holds the document (null for any other). */
  async original(documentId: string): Promise<Uint8Array | null> {
    const map = await this.map();
    const [index] = [...groupByShard(map, [documentId], (d) => d).keys()];
    return this.shard(index ?? 0).original(documentId);
  }

  async deleteDocuments(documentIds: string[]): Promise<{ chunks: string[] }> {
    const map = await this.map();
    const parts = await Promise.all(
      [...groupByShard(map, documentIds, (d) => d)].map(([index, ids]) => this.shard(index).deleteDocuments(ids)),
    );
    return { chunks: parts.flatMap((p) => p.chunks) };
  }

  /** Indexing progress of documents; those on a shard that fails have none, and it is named in `missing`. */
  async progress(
    documentIds: string[],
  ): Promise<ShardedRead<"progress", { documentId: string; chunksIndexed: number; chunksTotal: number }[]>> {
    const map = await this.map();
    const groups = groupByShard(map, documentIds, (d) => d);
    const { answers, missing } = await askShards(
      [...groups.keys()],
      (index) => this.shard(index).progress(groups.get(index) ?? []),
      "progress",
      this.timeoutMs,
    );
    return { progress: answers.flatMap(([, list]) => list), missing };
  }

  async stats(): Promise<{ chunks: number; vectors: number; dimensions: number; pending: number; shards: number }> {
    const map = await this.map();
    const all = await Promise.all(map.shards.map((s) => this.shard(s.index).stats()));
    return {
      chunks: all.reduce((a, s) => a + s.chunks, 0),
      vectors: all.reduce((a, s) => a + s.vectors, 0),
      dimensions: all.reduce((a, s) => Math.max(a, s.dimensions), 0),
      pending: all.reduce((a, s) => a + s.pending, 0),
      shards: map.shards.length,
    };
  }

  /** Every shard, then shard 0 (which holds the map). */
  async destroy(): Promise<void> {
    const map = await this.map();
    await Promise.all(map.shards.filter((s) => s.index !== 0).map((s) => this.shard(s.index).destroy()));
    await this.shard(0).destroy();
  }

  async ingest(job: IngestJob, options: { reset: boolean; start: boolean; total?: number }): Promise<IngestResult> {
    const map = await this.map();
    const index = shardOf(map, job.documentId).index;
    const heldElsewhere = options.reset && options.total !== undefined ? await this.chunksElsewhere(map, index) : 0;
    return this.shard(index).ingest(job, { ...options, heldElsewhere });
  }

  async ingestDocuments(jobs: DocumentJob[], audit?: StatementSpec): Promise<IngestResult[]> {
    // Shard 0 writes them itself while the base has one shard, else answers the map.
    const first = await this.shard(0).ingestDocumentsOrMap(jobs, audit);
    // Without `check` every answer is how the document's indexing ended.
    if ("results" in first) return first.results as IngestResult[];
    const map = first.map;
    const groups = [...groupByShard(map, jobs, (j) => j.documentId)];
    const results = new Map<DocumentJob, IngestResult>();
    // The audit entry is written once, with the first group's documents.
    await Promise.all(
      groups.map(async ([index, list], i) => {
        const out = await this.shard(index).ingestDocuments(
          list,
          i === 0 ? audit : undefined,
          await this.chunksElsewhere(map, index),
        );
        list.forEach((job, n) => results.set(job, out[n]));
      }),
    );
    return jobs.map(
      (j) => results.get(j) ?? { status: "failed", error: "indexing failed: no shard took this document" },
    );
  }

  /**
   * ingestDocuments with de-duplication answered by the index object (SmallDocumentWriter.ingest,
   * `check`), or "lookup" when the knowledge base has split: the caller then asks D1 and sends
   * the documents with ingestDocuments.
   */
  async ingestDocumentsChecked(jobs: DocumentJob[], audit?: StatementSpec): Promise<DocumentAnswer[] | "lookup"> {
    const first = await this.shard(0).ingestDocumentsOrMap(jobs, audit, true);
    return "results" in first ? first.results : "lookup";
  }

  /** Web sources are kept and crawled by shard 0. */
  webSourceCount(): Promise<number> {
    return this.shard(0).webSourceCount();
  }

  registerWebSource(record: WebSourceRecord, pages: StoredPage[]): Promise<void> {
    return this.shard(0).registerWebSource(record, pages);
  }
}
