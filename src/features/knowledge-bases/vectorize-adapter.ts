import { matchesFilter, type FilterNode } from "./metadata-filter";
import type { IndexVector, VectorIndex, VectorMatch, VectorMetadata, VectorQueryOptions } from "./index/vector-index";

/** Vectorize returns full metadata for at most this many matches per query. */
const VECTORIZE_MAX_TOP_K_WITH_METADATA = 50;

/** The part of a Vectorize binding this adapter uses (what the fake in the tests implements). */
export type VectorizeBinding = Pick<Vectorize, "upsert" | "query" | "getByIds" | "deleteByIds">;

type VectorizeFilter = VectorizeVectorMetadataFilter;
type FilterValue = string | number | boolean;

/**
 * Translates the parts of Loom's filter tree that Vectorize can evaluate itself (an AND of
 * equalities, set membership and numeric ranges on top-level keys). Whatever it cannot express
 * is still applied: every match is re-checked with the full predicate.
 */
export function toVectorizeFilter(node: FilterNode | undefined): VectorizeFilter | undefined {
  if (!node) return undefined;
  const parts = node.op === "and" ? node.children : [node];
  const out: Record<string, Record<string, FilterValue | FilterValue[]>> = {};
  const add = (key: string, op: string, value: FilterValue | FilterValue[]) => {
    out[key] ??= {};
    if (op in out[key]) return;
    out[key][op] = value;
  };
  for (const part of parts) {
    if (part.op === "eq") add(part.key, "$eq", part.value);
    else if (part.op === "in") add(part.key, "$in", part.values);
    else if (part.op === "not" && part.child.op === "eq") add(part.child.key, "$ne", part.child.value);
    else if (part.op === "not" && part.child.op === "in") add(part.child.key, "$nin", part.child.values);
    else if (part.op === "range") {
      for (const bound of ["gt", "gte", "lt", "lte"] as const) {
        const v = part[bound];
        if (typeof v === "number") add(part.key, `$${bound}`, v);
      }
    }
  }
  return Object.keys(out).length ? (out as VectorizeFilter) : undefined;
}

/** Vectorize metadata holds strings, numbers, booleans and string arrays; other values travel as JSON text. */
function toVectorizeMetadata(
  metadata: VectorMetadata | undefined,
): Record<string, VectorizeVectorMetadata> | undefined {
  if (!metadata) return undefined;
  const out: Record<string, VectorizeVectorMetadata> = {};
  for (const [key, value] of Object.entries(metadata)) {
    if (value === null || value === undefined) continue;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") out[key] = value;
    else if (Array.isArray(value) && value.every((v) => typeof v === "string")) out[key] = value as string[];
    else out[key] = JSON.stringify(value);
  }
  return out;
}

/** Loom's vector index over a real Vectorize binding: one namespace per knowledge base. */
export class VectorizeVectorIndex implements VectorIndex {
  constructor(
    private readonly binding: VectorizeBinding,
    private readonly namespace: string,
  ) {}

  async upsert(vectors: IndexVector[]): Promise<{ count: number }> {
    for (let i = 0; i < vectors.length; i += 1000) {
      const batch = vectors.slice(i, i + 1000).map((v) => ({
        id: v.id,
        values: Array.from(v.values),
        namespace: this.namespace,
        metadata: toVectorizeMetadata(v.metadata),
      }));
      await this.binding.upsert(batch);
    }
    return { count: vectors.length };
  }

  async query(vector: number[] | Float32Array, options: VectorQueryOptions): Promise<{ matches: VectorMatch[] }> {
    const needsCheck = options.filter !== undefined;
    const topK = needsCheck
      ? VECTORIZE_MAX_TOP_K_WITH_METADATA
      : Math.min(options.topK, needsCheck || options.returnMetadata ? VECTORIZE_MAX_TOP_K_WITH_METADATA : 100);
    const result = await this.binding.query(Array.from(vector), {
      topK,
      namespace: this.namespace,
      returnMetadata: needsCheck || options.returnMetadata ? "all" : "none",
      filter: toVectorizeFilter(options.filter),
    });
    const matches: VectorMatch[] = [];
    for (const match of result.matches) {
      const metadata = (match.metadata ?? {}) as VectorMetadata;
      if (options.filter && !matchesFilter(options.filter, metadata)) continue;
      matches.push({ id: match.id, score: match.score, metadata: options.returnMetadata ? metadata : undefined });
      if (matches.length >= options.topK) break;
    }
    return { matches };
  }

  async getByIds(ids: string[]): Promise<{ id: string; values: number[]; metadata?: VectorMetadata }[]> {
    const found = await this.binding.getByIds(ids);
    return found
      .filter((v) => (v.namespace ?? "") === this.namespace)
      .map((v) => ({ id: v.id, values: Array.from(v.values), metadata: v.metadata as VectorMetadata | undefined }));
  }

  async deleteByIds(ids: string[]): Promise<{ count: number }> {
    // Ids are global in Vectorize: delete only those in this knowledge base's namespace.
    const mine = (await this.getByIds(ids)).map((v) => v.id);
    for (let i = 0; i < mine.length; i += 1000) await this.binding.deleteByIds(mine.slice(i, i + 1000));
    return { count: mine.length };
  }
}
