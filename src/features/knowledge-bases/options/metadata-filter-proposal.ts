import type { ChatModel } from "../../../providers/types";
import type { UsageMeter } from "../../../providers/usage";

/** A metadata key the knowledge base actually has, with a few of its values to guide the model. */
export interface MetadataKey {
  key: string;
  values: (string | number | boolean)[];
}

export interface FilterProposal {
  /** A Qdrant-form filter, to be compiled and validated by the knowledge base like a user's filter. */
  filter?: Record<string, unknown>;
  /** Why the model's proposal was not used, when it was not. */
  rejected?: string;
}

const CLAUSES = new Set(["must", "should", "must_not"]);
const CONDITION_KEYS = new Set(["key", "match", "range", "is_empty"]);
const MAX_DEPTH = 4;
const MAX_CONDITIONS = 12;

/** The first balanced JSON object in a model's text (it may wrap it in prose or a code fence). */
export function firstJsonObject(text: string): unknown {
  const start = text.indexOf("{");
  if (start < 0) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "{") depth++;
    else if (ch === "}" && --depth === 0) {
      try {
        return JSON.parse(text.slice(start, i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * Checks a proposed filter before the knowledge base ever compiles it: only must / should /
 * must_not clauses of conditions, only on keys the knowledge base has, bounded in size and depth.
 * Anything else is rejected whole rather than half-applied.
 */
export function vetProposal(candidate: unknown, keys: readonly string[]): FilterProposal {
  const known = new Set(keys);
  let conditions = 0;
  const visit = (node: unknown, depth: number): string | undefined => {
    if (depth > MAX_DEPTH) return "the filter is nested too deeply";
    if (node === null || typeof node !== "object" || Array.isArray(node)) return "the filter is not an object";
    const entries = Object.entries(node as Record<string, unknown>);
    const isClause = entries.some(([k]) => CLAUSES.has(k));
    if (isClause) {
      for (const [k, v] of entries) {
        if (!CLAUSES.has(k)) return `unexpected field '${k}'`;
        if (!Array.isArray(v)) return `'${k}' is not a list`;
        for (const child of v) {
          const problem = visit(child, depth + 1);
          if (problem) return problem;
        }
      }
      return undefined;
    }
    for (const [k] of entries) if (!CONDITION_KEYS.has(k)) return `unexpected field '${k}'`;
    const record = node as { key?: unknown; is_empty?: { key?: unknown } };
    const key = record.key ?? record.is_empty?.key;
    if (typeof key !== "string") return "a condition names no key";
    if (!known.has(key)) return `the key '${key.slice(0, 60)}' is not in this knowledge base's metadata`;
    if (++conditions > MAX_CONDITIONS) return "the filter has too many conditions";
    return undefined;
  };
  if (candidate === undefined) return { rejected: "the model proposed no filter" };
  if (candidate !== null && typeof candidate === "object" && Object.keys(candidate).length === 0) return {};
  const problem = visit(candidate, 0);
  return problem ? { rejected: problem } : { filter: candidate as Record<string, unknown> };
}

/**
 * `generate_metadata_filters`: asks the model for a Qdrant-form filter over the knowledge base's own
 * metadata keys, then vets it. An empty object means "no filter is implied by the question".
 */
export async function proposeMetadataFilter(
  model: ChatModel,
  query: string,
  keys: MetadataKey[],
  usage: UsageMeter,
  signal?: AbortSignal,
): Promise<FilterProposal> {
  if (keys.length === 0) return { rejected: "the knowledge base has no metadata keys" };
  const described = keys
    .slice(0, 50)
    .map(
      (k) =>
        `- ${k.key}: e.g. ${
          k.values
            .slice(0, 5)
            .map((v) => JSON.stringify(v))
            .join(", ") || "(no values seen)"
        }`,
    )
    .join("\n");
  const result = await model.complete({
    messages: [
      {
        role: "system",
        content:
          "You turn constraints stated in a search question into a metadata filter in Qdrant's JSON form: " +
          '{"must": [{"key": K, "match": {"value": V}}, {"key": K, "range": {"gte": N}}], "should": [...], "must_not": [...]}. ' +
          "Use only the keys listed. If the question states no constraint on them, answer {}. Answer with the JSON object only.\n\nKeys:\n" +
          described,
      },
      { role: "user", content: query },
    ],
    maxTokens: 300,
    temperature: 0,
    signal,
  });
  usage.add(result.model, result.usage);
  return vetProposal(
    firstJsonObject(result.text),
    keys.map((k) => k.key),
  );
}
