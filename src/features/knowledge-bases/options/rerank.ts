import type { Reranker } from "../../../providers/types";
import type { RetrievedItem } from "./advanced-qa";

export const DEFAULT_RERANK_DEPTH = 20;

/**
 * `rerank_documents`: the reranker orders the first `depth` items (`num_chunks_to_rerank`) and its
 * scores replace theirs; items past the depth keep their order after them.
 */
export async function rerankItems(
  reranker: Reranker,
  query: string,
  items: RetrievedItem[],
  depth = DEFAULT_RERANK_DEPTH,
): Promise<RetrievedItem[]> {
  const head = items.slice(0, depth);
  const tail = items.slice(depth);
  if (head.length === 0) return items;
  const ranked = await reranker.rerank(
    query,
    head.map((item) => item.text),
    head.length,
  );
  const seen = new Set<number>();
  const reordered: RetrievedItem[] = [];
  for (const r of ranked) {
    const item = head[r.index];
    if (!item || seen.has(r.index)) continue;
    seen.add(r.index);
    reordered.push({ ...item, score: r.score });
  }
  // A reranker that returned fewer results than asked must not drop items.
  head.forEach((item, i) => {
    if (!seen.has(i)) reordered.push(item);
  });
  return [...reordered, ...tail];
}
