import type { FilterNode } from "../metadata-filter";

/**
 * The vector index in the shape of Cloudflare Vectorize: upsert, query with topK and a metadata
 * filter, get and delete by ids, one namespace per knowledge base. Loom's own implementation lives
 * in the knowledge base's Durable Object; `VectorizeVectorIndex` adapts a real Vectorize binding.
 */
export type VectorMetadata = Record<string, unknown>;

export interface IndexVector {
  id: string;
  values: number[] | Float32Array;
  metadata?: VectorMetadata;
}

export interface VectorMatch {
  id: string;
  score: number;
  metadata?: VectorMetadata;
}

export interface VectorQueryOptions {
  topK: number;
  /** Loom's filter tree; every match satisfies it. */
  filter?: FilterNode;
  returnMetadata?: boolean;
}

export interface VectorIndex {
  upsert(vectors: IndexVector[]): Promise<{ count: number }>;
  query(vector: number[] | Float32Array, options: VectorQueryOptions): Promise<{ matches: VectorMatch[] }>;
  getByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]>;
  deleteByIds(ids: string[]): Promise<{ count: number }>;
}

export const MAX_TOP_K = 1000;

/** Quantises a unit vector to int8 with one scale per vector (value = q * scale). */
export function quantize(values: ArrayLike<number>, out: Int8Array, offset: number): number {
  let max = 0;
  for (let i = 0; i < values.length; i++) max = Math.max(max, Math.abs(values[i]));
  const scale = max > 0 ? max / 127 : 1;
  for (let i = 0; i < values.length; i++) out[offset + i] = Math.round(values[i] / scale);
  return scale;
}

/**
 * Keeps the best `k` (score, slot) pairs seen, best first on `sorted()`; equal scores by item,
 * lowest first, whatever order they arrive in, so shards merged by (score, rowid) agree with one
 * index (shard-map.ts).
 */
export class TopK {
  private scores: number[] = [];
  private items: number[] = [];
  private readonly k: number;
  constructor(k: number) {
    this.k = k;
  }

  get threshold(): number {
    return this.scores.length < this.k ? -Infinity : this.scores[this.scores.length - 1];
  }

  push(score: number, item: number): void {
    const last = this.scores.length - 1;
    if (
      this.scores.length >= this.k &&
      (score < this.scores[last] || (score === this.scores[last] && item > this.items[last]))
    )
      return;
    let i = this.scores.length;
    if (i >= this.k) i--;
    else {
      this.scores.push(0);
      this.items.push(0);
    }
    while (i > 0 && (this.scores[i - 1] < score || (this.scores[i - 1] === score && this.items[i - 1] > item))) {
      this.scores[i] = this.scores[i - 1];
      this.items[i] = this.items[i - 1];
      i--;
    }
    this.scores[i] = score;
    this.items[i] = item;
  }

  sorted(): { score: number; item: number }[] {
    return this.scores.map((score, i) => ({ score, item: this.items[i] }));
  }
}
