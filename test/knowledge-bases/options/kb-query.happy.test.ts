import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg, type Org } from "../../helpers";
import type { AuthContext } from "../../../src/env";
import { queryWithModelOptions } from "../../../src/features/knowledge-bases/options/knowledge-base-query";
import type { QueryInput } from "../../../src/features/knowledge-bases/knowledge-bases.schemas";
import { QueryBody } from "../../../src/features/knowledge-bases/knowledge-bases.schemas";
import { createKb, query, seedCorpus, type Body } from "../kb-fixtures";
import { connect } from "../../providers/connect";
import { FakeAi, FakeNetwork, cohereRerank, openAiCompletion } from "../../providers/fake-providers";

function authOf(org: Org): AuthContext {
  return { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
}

/** The body as the route would parse it, so direct calls see exactly what the route passes on. */
const input = (body: Body): QueryInput => QueryBody.parse(body);

async function kbWithCorpus() {
  const org = await seedOrg();
  const kb = await createKb(org.owner.apiKey);
  const ids = await seedCorpus(org.owner.apiKey, kb);
  return { org, kb, ids, key: org.owner.apiKey };
}

/** An OpenAI-compatible fake that answers each kind of prompt the way a model would. */
function fakeModel(): FakeNetwork {
  return new FakeNetwork().on("https://api.openai.com/v1/chat/completions", (r) => {
    const messages = r.json?.messages as { role: string; content: string }[];
    const system = messages[0]?.content ?? "";
    const user = messages.at(-1)?.content ?? "";
    if (system.includes("rewrite a user's search query")) return openAiCompletion("how do whales breathe");
    if (system.includes("different search queries"))
      return openAiCompletion("whale blowhole air\nmarine mammal respiration");
    if (system.includes("metadata filter"))
      return openAiCompletion('{"must": [{"key": "topic", "match": {"value": "geology"}}]}');
    if (system.includes("Summarise the document")) return openAiCompletion(`Summary of: ${user.slice(0, 20)}`);
    return openAiCompletion(`Whales breathe air through blowholes [1].`);
  });
}

describe("knowledge-base query options: offline, through the route", () => {
  it("do_advanced_qa answers extractively with citations when the organization has no chat connection", async () => {
    const { kb, key, ids } = await kbWithCorpus();
    const res = await query(key, kb, { query: "how do whales breathe", config: { do_advanced_qa: true } });
    expect(res.status).toBe(200);
    const result = res.body.result as Body;
    expect(result.response).toBe("Whales breathe air through blowholes [1].");
    expect(result.answer_metadata).toMatchObject({
      model: "loom/extractive",
      extractive: true,
      mode: "fast",
      citations: [{ source: 1, documentId: ids.whales }],
    });
    expect(result.usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
  });

  it("expand_query adds a pseudo-relevance-feedback query, shown in result.queries", async () => {
    const { kb, key } = await kbWithCorpus();
    const res = await query(key, kb, { query: "blue whale", config: { expand_query: true } });
    expect(res.status).toBe(200);
    const queries = (res.body.result as Body).queries as string[];
    expect(queries[0]).toBe("blue whale");
    expect(queries).toHaveLength(2);
    expect(queries[1]?.startsWith("blue whale ")).toBe(true);
    expect(queries[1]).toMatch(/whales|mammals|blowholes|animal/);
  });
});

describe("knowledge-base query options: with model providers", () => {
  it("transform_query and answer_multi_query: result.queries shows the queries that ran, and usage adds up", async () => {
    const { org, kb } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-kbq-1111" });
    const net = fakeModel();
    const result = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      input({
        query: "and how do they breathe?",
        context: "user: tell me about whales",
        config: { transform_query: true, answer_multi_query: true },
      }),
      { fetch: net.fetch },
    );
    expect(result.queries).toEqual(["how do whales breathe", "whale blowhole air", "marine mammal respiration"]);
    expect(result.usage).toMatchObject({ input_tokens: 84, output_tokens: 14, total_tokens: 98 });
    const rewriteUser = (net.received[0]?.json?.messages as { content: string }[] | undefined)?.at(-1)?.content ?? "";
    expect(rewriteUser).toContain("tell me about whales");
    expect(rewriteUser).toContain("and how do they breathe?");
  });

  it("generate_metadata_filters proposes a filter over the knowledge base's own keys and applies it compiled", async () => {
    const { org, kb, ids } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-kbq-2222" });
    const net = fakeModel();
    const result = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      input({ query: "rupture of the crust", config: { generate_metadata_filters: true } }),
      { fetch: net.fetch },
    );
    expect(result.generated_filter).toEqual({ applied: { must: [{ key: "topic", match: { value: "geology" } }] } });
    expect((result.chunks ?? []).map((c) => c.document_id)).toEqual([ids.volcano]);
    const system = (net.received[0]?.json?.messages as { content: string }[] | undefined)?.[0]?.content ?? "";
    expect(system).toMatch(/- topic: e\.g\. .*"geology"/);
    expect(system).toContain("- year: e.g.");
  });

  it("do_advanced_qa through a chat connection: the prompt carries the retrieved chunks and the question", async () => {
    const { org, kb, ids } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-kbq-3333" });
    const net = fakeModel();
    const result = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      input({
        query: "how do whales breathe",
        config: { do_advanced_qa: true, question_answering_config: { advanced_qa_mode: "fast" } },
      }),
      { fetch: net.fetch },
    );
    expect(result.response).toBe("Whales breathe air through blowholes [1].");
    expect(result.answer_metadata).toMatchObject({
      model: "openai/gpt-4o-mini",
      extractive: false,
      citations: [{ source: 1, documentId: ids.whales }],
    });
    const messages = net.received[0]?.json?.messages as { content: string }[];
    expect(messages[0]?.content).toContain("Whales breathe air through blowholes.");
    expect(messages.at(-1)?.content).toBe("how do whales breathe");
  });

  it("generate_ai_doc_summaries summarises each returned document once, then serves the cache", async () => {
    const { org, kb, ids } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-kbq-4444" });
    const net = fakeModel();
    const body = input({
      query: "bread yeast",
      search_metadata: { top_k: 2 },
      config: { generate_ai_doc_summaries: true },
    });
    const first = await queryWithModelOptions(env, authOf(org), kb, body, { fetch: net.fetch });
    expect(first.summaries?.[ids.bread]).toBe("Summary of: Sourdough bread is m");
    const calls = net.received.length;
    const second = await queryWithModelOptions(env, authOf(org), kb, body, { fetch: net.fetch });
    expect(second.summaries).toEqual(first.summaries);
    expect(net.received.length).toBe(calls);
    expect(second.usage.total_tokens).toBe(0);
  });

  it("rerank_documents reorders the top num_chunks_to_rerank with a per-request key, and Workers AI serves chat", async () => {
    const { org, kb, ids } = await kbWithCorpus();
    await connect(org, { name: "cf", kind: "workers_ai" });
    const net = new FakeNetwork().on("https://api.cohere.com/v2/rerank", cohereRerank);
    const ai = new FakeAi();
    const result = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      input({
        query: "sourdough starter",
        config: {
          rerank_documents: true,
          reranking_config: { reranking_model: "rerank-v3.5", api_key: "one-call-key-5555", num_chunks_to_rerank: 3 },
          do_advanced_qa: true,
        },
      }),
      { fetch: net.fetch, ai },
    );
    expect(net.received[0]?.headers.authorization).toBe("Bearer one-call-key-5555");
    expect((net.received[0]?.json?.documents as string[] | undefined)?.length).toBeLessThanOrEqual(3);
    expect(result.chunks?.[0]?.document_id).toBe(ids.bread);
    expect(result.answer_metadata?.model).toBe("cf/@cf/meta/llama-3.1-8b-instruct");
    expect(ai.calls[0]?.inputs.messages).toBeDefined();
  });
});
