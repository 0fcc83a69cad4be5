/**
 * Pseudo-relevance feedback on the vector side (Rocchio): the query's embedding is moved towards
 * the mean embedding of the top chunks of its first fused ranking, and the candidates both halves
 * found are rescored with it. A short or wordy query embeds poorly with a static embedder; the top
 * chunks that both halves agree on say better what it is about. Measured in `npm run
 * eval:retrieval` (BENCHMARKS.md).
 */
export const VECTOR_FEEDBACK = {
  /** Top chunks of the first fused ranking whose embeddings are averaged. */
  docs: 5,
  /** Weight of their mean against the query's own embedding (Rocchio's beta, with alpha 1). */
  weight: 1,
} as const;

/** `query + weight * mean(feedback)`, scaled back to unit length; the query itself when no feedback vector fits. */
export function rocchio(
  query: ArrayLike<number>,
  feedback: ArrayLike<number>[],
  weight: number = VECTOR_FEEDBACK.weight,
): number[] {
  const usable = feedback.filter((v) => v.length === query.length);
  const out = Array.from(query);
  if (usable.length === 0 || !(weight > 0)) return out;
  for (const v of usable) for (let i = 0; i < out.length; i++) out[i] += (weight * v[i]) / usable.length;
  let norm = 0;
  for (const x of out) norm += x * x;
  norm = Math.sqrt(norm);
  return norm > 0 ? out.map((x) => x / norm) : Array.from(query);
}
