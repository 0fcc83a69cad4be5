import { WorkerEntrypoint } from "cloudflare:workers";
import { FakeVectorize } from "./fake-vectorize";

/**
 * The fake Vectorize binding as a Worker of its own, so the Loom Worker under test reaches it
 * through a binding exactly as it reaches a real Vectorize index (the `vectorize` test project in
 * vitest.config.ts). One index for the whole run: namespaces keep knowledge bases apart.
 */
const index = new FakeVectorize();

export class FakeVectorizeBinding extends WorkerEntrypoint {
  upsert(vectors: VectorizeVector[]) {
    return index.upsert(vectors);
  }

  query(vector: number[], options: VectorizeQueryOptions) {
    return index.query(vector, options);
  }

  getByIds(ids: string[]) {
    return index.getByIds(ids);
  }

  deleteByIds(ids: string[]) {
    return index.deleteByIds(ids);
  }

  /** For tests: how many vectors a namespace holds. */
  countIn(namespace: string): number {
    return [...index.vectors.values()].filter((v) => v.namespace === namespace).length;
  }
}

export default {
  fetch(): Response {
    return new Response("fake Vectorize: use the RPC methods", { status: 404 });
  },
};
