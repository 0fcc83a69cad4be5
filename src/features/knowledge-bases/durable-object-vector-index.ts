import type { Env } from "../../env";
import type { KnowledgeBaseIndex } from "../../durable-objects/knowledge-base-index";
import type { IndexVector, VectorIndex, VectorMatch, VectorMetadata, VectorQueryOptions } from "./vector-index";

/** The RPC methods callers use; typed from the class (the stub type cannot carry `unknown` metadata). */
export type KnowledgeBaseIndexRpc = Pick<
  KnowledgeBaseIndex,
  "retrieve" | "vectorUpsert" | "vectorQuery" | "vectorGetByIds" | "vectorDeleteByIds" | "keywordSearch" | "getChunks" | "documentChunks" | "deleteDocuments" | "destroy" | "stats" | "dropMemory" | "ingest" | "ingestDocuments" | "progress" | "registerWebSource" | "webSourceCount"
>;

/** The one place that reaches a knowledge base's Durable Object. */
export function indexStub(env: Env, kbId: string): KnowledgeBaseIndexRpc {
  return env.KB_INDEX.get(env.KB_INDEX.idFromName(kbId)) as unknown as KnowledgeBaseIndexRpc;
}

/** Loom's own vector index: the vectors inside the knowledge base's Durable Object. */
export class DurableObjectVectorIndex implements VectorIndex {
  constructor(private readonly stub: KnowledgeBaseIndexRpc) {}

  async upsert(vectors: IndexVector[]): Promise<{ count: number }> {
    return this.stub.vectorUpsert(vectors.map((v) => ({ id: v.id, values: Array.from(v.values), metadata: v.metadata })));
  }

  async query(vector: number[] | Float32Array, options: VectorQueryOptions): Promise<{ matches: VectorMatch[] }> {
    return this.stub.vectorQuery(Array.from(vector), options);
  }

  async getByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]> {
    return this.stub.vectorGetByIds(ids);
  }

  async deleteByIds(ids: string[]): Promise<{ count: number }> {
    return this.stub.vectorDeleteByIds(ids);
  }
}
