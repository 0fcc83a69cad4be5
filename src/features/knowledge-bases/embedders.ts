import type { Env } from "../../env";
import type { Embedder } from "../../providers/types";
import { badRequest } from "../../lib/errors";
import { createStaticEmbedder, STATIC_EMBEDDER_MODEL } from "../../providers/static-embedder";

/**
 * The embedders a knowledge base can be created with, by model name. The offline default is the
 * static embedding table (src/providers/static-embedder.ts); provider-backed embedders join here
 * when connections can name them.
 */
type EmbedderFactory = (env: Env) => Embedder | Promise<Embedder>;

const FACTORIES = new Map<string, EmbedderFactory>();

export function registerEmbedder(model: string, factory: EmbedderFactory): void {
  FACTORIES.set(model, factory);
}

export const DEFAULT_EMBEDDING_MODEL = STATIC_EMBEDDER_MODEL;

registerEmbedder(STATIC_EMBEDDER_MODEL, (env) => createStaticEmbedder(env));

export function knownEmbeddingModels(): string[] {
  return [...FACTORIES.keys()];
}

export async function resolveEmbedder(env: Env, model: string): Promise<Embedder> {
  const factory = FACTORIES.get(model);
  if (!factory)
    throw badRequest(`unknown embedding model: ${model} (available: ${knownEmbeddingModels().join(", ") || "none"})`);
  return factory(env);
}
