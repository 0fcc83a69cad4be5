import type { TokenUsage } from "./types";

export const noUsage = (): TokenUsage => ({ input_tokens: 0, output_tokens: 0 });

/** Sums token usage across the model calls one request makes, for `result.usage`. */
export class UsageMeter {
  private readonly totals: TokenUsage = noUsage();
  private readonly perModel = new Map<string, TokenUsage>();

  add(model: string, usage: TokenUsage): void {
    this.totals.input_tokens += usage.input_tokens;
    this.totals.output_tokens += usage.output_tokens;
    const entry = this.perModel.get(model) ?? noUsage();
    entry.input_tokens += usage.input_tokens;
    entry.output_tokens += usage.output_tokens;
    this.perModel.set(model, entry);
  }

  get total(): TokenUsage {
    return { ...this.totals };
  }

  /** `{input_tokens, output_tokens, total_tokens, by_model}` as responses show it. */
  report(): TokenUsage & { total_tokens: number; by_model: Record<string, TokenUsage> } {
    return {
      ...this.total,
      total_tokens: this.totals.input_tokens + this.totals.output_tokens,
      by_model: Object.fromEntries(this.perModel),
    };
  }
}

/** Unit length, so cosine similarity is a dot product; a zero vector stays zero. */
export function normalize(values: ArrayLike<number>): Float32Array {
  const vector = Float32Array.from(values);
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i] = (vector[i] ?? 0) / norm;
  return vector;
}

/** Parses a tool call's JSON arguments; a model that sends broken JSON gets its raw text kept. */
export function parseArguments(raw: string): Record<string, unknown> {
  if (!raw.trim()) return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : { value: parsed };
  } catch {
    return { _raw: raw };
  }
}
