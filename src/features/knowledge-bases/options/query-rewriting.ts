import type { ChatModel } from "../../../providers/types";
import type { UsageMeter } from "../../../providers/usage";

/** Bounds on what a model may hand back as queries, so a runaway answer cannot fan out a search. */
export const MAX_QUERY_CHARS = 500;
export const MAX_VARIANTS = 5;

/** One line of model output as a query: bullets, numbering and surrounding quotes removed. */
export function cleanQueryLine(line: string): string {
  return line
    .replace(/^\s*(?:[-*•]|\d+[.)]|query\s*\d*\s*:)\s*/i, "")
    .replace(/^["'“”‘’`]+|["'“”‘’`]+$/g, "")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, MAX_QUERY_CHARS);
}

/**
 * `transform_query`: rewrites the query into a standalone search query using `context` (e.g. the
 * conversation so far). A model that answers nothing usable leaves the query as it was.
 */
export async function transformQuery(
  model: ChatModel,
  query: string,
  context: string | undefined,
  usage: UsageMeter,
  signal?: AbortSignal,
): Promise<string> {
  const result = await model.complete({
    messages: [
      {
        role: "system",
        content:
          "You rewrite a user's search query so that it stands alone and retrieves the right passages from a document collection. " +
          "Resolve pronouns and references using the context. Keep the user's language and key terms. Answer with the rewritten query only, on one line.",
      },
      {
        role: "user",
        content: `${context?.trim() ? `Context:\n${context.trim().slice(0, 8_000)}\n\n` : ""}Query: ${query}`,
      },
    ],
    maxTokens: 200,
    temperature: 0,
    signal,
  });
  usage.add(result.model, result.usage);
  const line = result.text
    .split("\n")
    .map(cleanQueryLine)
    .find((l) => l.length > 0);
  return line ?? query;
}

/**
 * `answer_multi_query` and the model form of `expand_query`: alternative phrasings of the query,
 * one per line, deduplicated and bounded. The original query is not among them.
 */
export async function generateQueryVariants(
  model: ChatModel,
  query: string,
  count: number,
  usage: UsageMeter,
  signal?: AbortSignal,
): Promise<string[]> {
  const n = Math.max(1, Math.min(count, MAX_VARIANTS));
  const result = await model.complete({
    messages: [
      {
        role: "system",
        content:
          `Write ${n} different search queries that would find passages answering the user's question: use synonyms, related technical terms and different angles. ` +
          "One query per line, no numbering, no commentary.",
      },
      { role: "user", content: query },
    ],
    maxTokens: 60 * n,
    temperature: 0.3,
    signal,
  });
  usage.add(result.model, result.usage);
  const seen = new Set([query.trim().toLowerCase()]);
  const variants: string[] = [];
  for (const line of result.text.split("\n").map(cleanQueryLine)) {
    const key = line.toLowerCase();
    if (!line || seen.has(key)) continue;
    seen.add(key);
    variants.push(line);
    if (variants.length >= n) break;
  }
  return variants;
}
