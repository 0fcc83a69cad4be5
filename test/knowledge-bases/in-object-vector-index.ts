import { runInDurableObject } from "cloudflare:test";
import type { KnowledgeBaseIndex } from "../../src/features/knowledge-bases/index/knowledge-base-index";
import type { ChunkRetriever } from "../../src/features/knowledge-bases/index/chunk-retriever";
import type {
  IndexVector,
  VectorIndex,
  VectorMatch,
  VectorMetadata,
  VectorQueryOptions,
} from "../../src/features/knowledge-bases/index/vector-index";
import type { VectorStore } from "../../src/features/knowledge-bases/index/vector-store";

/** The parts of the object the vector-index suite drives: its item writes and its vector reads. */
interface IndexInternals {
  upsertItems(
    items: {
      id: string;
      documentId: string | null;
      position: number;
      text: string | null;
      metadata: VectorMetadata;
      values?: ArrayLike<number>;
    }[],
  ): number[];
  deleteRows(rowids: number[]): void;
  readonly retriever: ChunkRetriever;
  readonly vectors: VectorStore;
}

/**
 * Loom's own vector index, driven inside its Durable Object with `runInDurableObject` (the object
 * has no vector RPC: production writes vectors only while ingesting), so the Vectorize-shaped
 * suite checks the same packed vectors and filters that retrieval reads.
 */
export class InObjectVectorIndex implements VectorIndex {
  constructor(private readonly stub: DurableObjectStub<KnowledgeBaseIndex>) {}

  private inside<R>(work: (index: IndexInternals, state: DurableObjectState) => R): Promise<R> {
    return runInDurableObject(this.stub, (instance: KnowledgeBaseIndex, state) =>
      work(instance as unknown as IndexInternals, state),
    );
  }

  upsert(vectors: IndexVector[]): Promise<{ count: number }> {
    return this.inside((index, state) => {
      state.storage.transactionSync(() => {
        const documentId = (v: IndexVector) =>
          typeof v.metadata?.document_id === "string" ? v.metadata.document_id : null;
        index.upsertItems(
          vectors.map((v) => ({
            id: v.id,
            documentId: documentId(v),
            position: 0,
            text: null,
            metadata: v.metadata ?? {},
            values: Array.from(v.values),
          })),
        );
      });
      return { count: vectors.length };
    });
  }

  query(vector: number[] | Float32Array, options: VectorQueryOptions): Promise<{ matches: VectorMatch[] }> {
    return this.inside((index) => index.retriever.vectorQuery(Array.from(vector), options));
  }

  getByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]> {
    return this.inside((index, state) =>
      ids.flatMap((id) => {
        const row = state.storage.sql
          .exec<{ rowid: number; metadata: string }>("SELECT rowid, metadata FROM items WHERE id = ?", id)
          .toArray()[0];
        const values = row ? index.vectors.valuesOf(row.rowid) : undefined;
        return row && values ? [{ id, values, metadata: JSON.parse(row.metadata) as VectorMetadata }] : [];
      }),
    );
  }

  deleteByIds(ids: string[]): Promise<{ count: number }> {
    return this.inside((index, state) => {
      const rowids = ids.flatMap((id) =>
        state.storage.sql
          .exec<{ rowid: number }>("SELECT rowid FROM items WHERE id = ?", id)
          .toArray()
          .map((r) => r.rowid),
      );
      state.storage.transactionSync(() => index.deleteRows(rowids));
      return { count: rowids.length };
    });
  }
}
