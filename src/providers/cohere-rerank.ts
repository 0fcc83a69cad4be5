import { joinUrl, providerFailed, sendJson, type ProviderTransport } from "./http";
import type { Reranker, RerankResult, TokenUsage } from "./types";

/**
 * Cohere's rerank wire format (`POST /v2/rerank`, also `/v1/rerank`), which Jina, Voyage-style
 * gateways, vLLM and Hugging Face TEI routers also speak. A base URL ending in `/v1` or `/v2` picks
 * that version; otherwise v2.
 */
export interface RerankEndpoint {
  transport: ProviderTransport;
  baseUrl: string;
  secret: string | null;
  connection: string;
}

export const COHERE_BASE_URL = "https://api.cohere.com";

export function rerankUrl(baseUrl: string): string {
  return /\/v[12]\/?$/.test(baseUrl) ? joinUrl(baseUrl, "rerank") : joinUrl(baseUrl, "v2/rerank");
}

interface RerankResponse {
  results?: { index: number; relevance_score: number }[];
  meta?: { billed_units?: { search_units?: number; input_tokens?: number } };
  usage?: { total_tokens?: number; prompt_tokens?: number };
}

export class CohereReranker implements Reranker {
  readonly model: string;
  lastUsage: TokenUsage = { input_tokens: 0, output_tokens: 0 };

  constructor(
    private readonly endpoint: RerankEndpoint,
    private readonly remoteModel: string,
  ) {
    this.model = `${endpoint.connection}/${remoteModel}`;
  }

  async rerank(query: string, documents: string[], topN?: number): Promise<RerankResult[]> {
    if (documents.length === 0) return [];
    const t = this.endpoint.transport;
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.endpoint.secret) headers.authorization = `Bearer ${this.endpoint.secret}`;
    const answer = await sendJson<RerankResponse>(t, rerankUrl(this.endpoint.baseUrl), {
      method: "POST",
      headers,
      body: JSON.stringify({
        model: this.remoteModel,
        query,
        documents,
        top_n: Math.min(topN ?? documents.length, documents.length),
      }),
    });
    if (!Array.isArray(answer.results)) throw providerFailed(t, "the answer held no results");
    const results: RerankResult[] = [];
    for (const item of answer.results) {
      if (!Number.isInteger(item.index) || item.index < 0 || item.index >= documents.length)
        throw providerFailed(t, `the answer named document ${item.index}, which was not sent`);
      results.push({ index: item.index, score: Number(item.relevance_score) });
    }
    this.lastUsage = {
      input_tokens:
        answer.meta?.billed_units?.input_tokens ?? answer.usage?.prompt_tokens ?? answer.usage?.total_tokens ?? 0,
      output_tokens: 0,
    };
    return results.sort((a, b) => b.score - a.score);
  }
}
