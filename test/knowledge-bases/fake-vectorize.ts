import type { VectorizeBinding } from "../../src/features/knowledge-bases/vectorize-adapter";

type Stored = { id: string; values: number[]; namespace?: string; metadata?: Record<string, VectorizeVectorMetadata> };
type Op = "$eq" | "$ne" | "$in" | "$nin" | "$lt" | "$lte" | "$gt" | "$gte";

/**
 * An in-memory stand-in for a Vectorize binding, following its documented behaviour: ids are
 * global, a namespace partitions queries, cosine similarity, metadata filters with $eq, $ne, $in,
 * $nin, $lt, $lte, $gt, $gte on top-level keys (implicit AND), topK capped at 50 with full metadata.
 */
export class FakeVectorize implements VectorizeBinding {
  readonly vectors = new Map<string, Stored>();

  async upsert(vectors: VectorizeVector[]): Promise<VectorizeAsyncMutation> {
    for (const v of vectors)
      this.vectors.set(v.id, {
        id: v.id,
        values: Array.from(v.values),
        namespace: v.namespace,
        metadata: v.metadata as Stored["metadata"],
      });
    return { mutationId: crypto.randomUUID() };
  }

  async deleteByIds(ids: string[]): Promise<VectorizeAsyncMutation> {
    for (const id of ids) this.vectors.delete(id);
    return { mutationId: crypto.randomUUID() };
  }

  async getByIds(ids: string[]): Promise<VectorizeVector[]> {
    return ids.flatMap((id) => {
      const v = this.vectors.get(id);
      return v ? [{ ...v }] : [];
    });
  }

  async query(vector: VectorFloatArray | number[], options: VectorizeQueryOptions = {}): Promise<VectorizeMatches> {
    const topK = options.topK ?? 5;
    const withMetadata = options.returnMetadata === true || options.returnMetadata === "all";
    if (withMetadata && topK > 50)
      throw new Error("VECTOR_QUERY_ERROR: topK must be at most 50 when returning metadata");
    const q = Array.from(vector);
    const matches = [...this.vectors.values()]
      .filter(
        (v) => (options.namespace === undefined || v.namespace === options.namespace) && this.passes(v, options.filter),
      )
      .map((v) => ({
        id: v.id,
        score: cosine(q, v.values),
        namespace: v.namespace,
        metadata: withMetadata ? v.metadata : undefined,
      }))
      .sort((a, b) => b.score - a.score)
      .slice(0, topK);
    return { matches, count: matches.length };
  }

  private passes(v: Stored, filter: VectorizeVectorMetadataFilter | undefined): boolean {
    if (!filter) return true;
    return Object.entries(filter).every(([key, condition]) => {
      const value = v.metadata?.[key] as unknown;
      const ops: [Op, unknown][] =
        condition !== null && typeof condition === "object"
          ? (Object.entries(condition) as [Op, unknown][])
          : [["$eq", condition]];
      return ops.every(([op, target]) => {
        const values = Array.isArray(value) ? value : [value];
        switch (op) {
          case "$eq":
            return values.includes(target);
          case "$ne":
            return !values.includes(target);
          case "$in":
            return values.some((x) => (target as unknown[]).includes(x));
          case "$nin":
            return !values.some((x) => (target as unknown[]).includes(x));
          default: {
            if (typeof value !== typeof target || value === undefined) return false;
            const a = value as number;
            const b = target as number;
            return op === "$lt" ? a < b : op === "$lte" ? a <= b : op === "$gt" ? a > b : a >= b;
          }
        }
      });
    });
  }
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}
