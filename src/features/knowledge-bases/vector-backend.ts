import type { Env } from "../../env";
import type { VectorIndex } from "./index/vector-index";
import { VectorizeVectorIndex } from "./vectorize-adapter";

/**
 * Which vector index a knowledge base uses: Loom's own (inside its Durable Object, the default)
 * or a real Vectorize index when the deployment binds `VECTORIZE` and sets
 * `KB_VECTOR_BACKEND = "vectorize"`. Returns undefined for Loom's own.
 */
export function vectorIndexFor(env: Env, kbId: string): VectorIndex | undefined {
  if ((env.KB_VECTOR_BACKEND ?? "durable-object") !== "vectorize") return undefined;
  if (!env.VECTORIZE) throw new Error("KB_VECTOR_BACKEND is 'vectorize' but no VECTORIZE binding is configured");
  return new VectorizeVectorIndex(env.VECTORIZE, kbId);
}
