import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../../helpers";
import { chatModelFor, rerankerFor } from "../../../src/providers/registry";
import { ExtractiveAnswerer } from "../../../src/providers/extractive";
import { UsageMeter } from "../../../src/providers/usage";
import { generateQueryVariants, transformQuery } from "../../../src/features/knowledge-bases/options/query-rewriting";
import {
  proposeMetadataFilter,
  vetProposal,
} from "../../../src/features/knowledge-bases/options/metadata-filter-proposal";
import { advancedAnswer, type RetrievedItem } from "../../../src/features/knowledge-bases/options/advanced-qa";
import { rerankItems } from "../../../src/features/knowledge-bases/options/rerank";
import { d1SummaryCache, summarizeDocuments } from "../../../src/features/knowledge-bases/options/doc-summaries";
import { connect } from "../../providers/connect";
import { FakeNetwork, cohereRerank, openAiCompletion, type Received } from "../../providers/fake-providers";

/** An OpenAI-compatible fake whose answer depends on the prompt, like a real model's would. */
function scriptedOpenAi(answer: (system: string, user: string, request: Received) => string): FakeNetwork {
  return new FakeNetwork().on("https://api.openai.com/v1/chat/completions", (r) => {
    const messages = r.json?.messages as { role: string; content: string }[];
    return openAiCompletion(
      answer(messages.find((m) => m.role === "system")?.content ?? "", messages.at(-1)?.content ?? "", r),
      { prompt_tokens: 10, completion_tokens: 5 },
    );
  });
}

async function openAiOrg() {
  const org = await seedOrg();
  await connect(org, { name: "openai", kind: "openai", secret: "sk-options-1234" });
  return org;
}

const items: RetrievedItem[] = [
  {
    id: "c1",
    document_id: "d1",
    score: 0.9,
    text: "Lift increased with the slipstream velocity ratio.",
    metadata: { name: "slipstream.pdf" },
  },
  {
    id: "c2",
    document_id: "d2",
    score: 0.8,
    text: "Heat conduction in slabs was solved.",
    metadata: { name: "slabs.pdf" },
  },
  {
    id: "c3",
    document_id: "d1",
    score: 0.7,
    text: "The wing was mounted in a small tunnel.",
    metadata: { name: "slipstream.pdf" },
  },
];

describe("query options: rewriting", () => {
  it("transform_query sends the context and the query, and runs the model's rewrite", async () => {
    const org = await openAiOrg();
    const net = scriptedOpenAi(() => '"lift of a wing in a propeller slipstream"\nextra line');
    const usage = new UsageMeter();
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    const rewritten = await transformQuery(
      model,
      "what about its lift?",
      "user: tell me about wings in slipstreams",
      usage,
    );
    expect(rewritten).toBe("lift of a wing in a propeller slipstream");
    const user = (net.received[0]?.json?.messages as { content: string }[] | undefined)?.at(-1)?.content;
    expect(user).toContain("tell me about wings in slipstreams");
    expect(user).toContain("Query: what about its lift?");
    expect(usage.report()).toMatchObject({
      input_tokens: 10,
      output_tokens: 5,
      total_tokens: 15,
      by_model: { "openai/gpt-4o-mini": { input_tokens: 10 } },
    });
  });

  it("answer_multi_query variants are cleaned, deduplicated and bounded", async () => {
    const org = await openAiOrg();
    const net = scriptedOpenAi(
      () =>
        "1. wing lift slipstream\n- Wing lift slipstream\n\n* propeller wake effect on lift\nwhat about lift\n4) spanwise lift distribution\nfifth\nsixth",
    );
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    expect(await generateQueryVariants(model, "What about lift", 3, new UsageMeter())).toEqual([
      "wing lift slipstream",
      "propeller wake effect on lift",
      "spanwise lift distribution",
    ]);
  });
});

describe("query options: generated metadata filters", () => {
  it("offers only the knowledge base's keys and keeps a valid proposal", async () => {
    const org = await openAiOrg();
    const net = scriptedOpenAi(
      () =>
        'Here you go:\n```json\n{"must": [{"key": "year", "range": {"gte": 1958}}, {"key": "journal", "match": {"value": "j. ae. scs."}}]}\n```',
    );
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    const proposal = await proposeMetadataFilter(
      model,
      "papers since 1958 in j. ae. scs.",
      [
        { key: "year", values: [1957, 1958] },
        { key: "journal", values: ["j. ae. scs."] },
      ],
      new UsageMeter(),
    );
    expect(proposal).toEqual({
      filter: {
        must: [
          { key: "year", range: { gte: 1958 } },
          { key: "journal", match: { value: "j. ae. scs." } },
        ],
      },
    });
    const system = (net.received[0]?.json?.messages as { content: string }[] | undefined)?.[0]?.content ?? "";
    expect(system).toContain("- year: e.g. 1957, 1958");
    expect(system).toContain('- journal: e.g. "j. ae. scs."');
  });

  it("never trusts a proposal blindly: unknown keys, odd fields and junk are rejected whole", () => {
    expect(vetProposal({ must: [{ key: "owner_email", match: { value: "x" } }] }, ["year"])).toEqual({
      rejected: "the key 'owner_email' is not in this knowledge base's metadata",
    });
    expect(vetProposal({ must: [{ key: "year", match: { value: 1 } }], $where: "1" }, ["year"])).toEqual({
      rejected: "unexpected field '$where'",
    });
    expect(vetProposal({ must: { key: "year" } }, ["year"])).toEqual({ rejected: "'must' is not a list" });
    expect(vetProposal(undefined, ["year"])).toEqual({ rejected: "the model proposed no filter" });
    expect(vetProposal({}, ["year"])).toEqual({});
    expect(vetProposal({ must: [{ must: [{ must: [{ must: [{ must: [{ key: "year" }] }] }] }] }] }, ["year"])).toEqual({
      rejected: "the filter is nested too deeply",
    });
  });
});

describe("query options: advanced QA", () => {
  it("fast answers once over the top items with citations", async () => {
    const org = await openAiOrg();
    const net = scriptedOpenAi(() => "Lift rises with the velocity ratio [1].");
    const usage = new UsageMeter();
    const answer = await advancedAnswer(
      await chatModelFor(env, org, undefined, { fetch: net.fetch }),
      "how does lift change?",
      items,
      "fast",
      usage,
    );
    expect(answer).toMatchObject({
      text: "Lift rises with the velocity ratio [1].",
      mode: "fast",
      extractive: false,
      citations: [{ source: 1, documentId: "d1", chunkId: "c1", title: "slipstream.pdf" }],
    });
    const system = (net.received[0]?.json?.messages as { content: string }[] | undefined)?.[0]?.content ?? "";
    expect(system).toContain("[1] (slipstream.pdf) Lift increased with the slipstream velocity ratio.");
    expect(system).toContain("[3] (slipstream.pdf) The wing was mounted");
    expect(net.received).toHaveLength(1);
  });

  it("accurate answers per document, then combines with citations to documents", async () => {
    const org = await openAiOrg();
    const net = scriptedOpenAi((system) =>
      system.includes("Combine them")
        ? "Lift rises [1]; slabs are unrelated [2]."
        : system.includes("Heat conduction")
          ? "Slabs were solved [1]."
          : "Lift rises [1][2].",
    );
    const usage = new UsageMeter();
    const answer = await advancedAnswer(
      await chatModelFor(env, org, undefined, { fetch: net.fetch }),
      "lift?",
      items,
      "accurate",
      usage,
    );
    expect(net.received).toHaveLength(3);
    expect(answer.text).toBe("Lift rises [1]; slabs are unrelated [2].");
    expect(answer.citations.map((c) => c.documentId)).toEqual(["d1", "d2"]);
    const combining = (net.received[2]?.json?.messages as { content: string }[] | undefined)?.[0]?.content ?? "";
    expect(combining).toContain("[1] (slipstream.pdf) Lift rises.");
    expect(usage.total).toEqual({ input_tokens: 30, output_tokens: 15 });
  });

  it("works offline with the extractive answerer, flagged as extractive", async () => {
    const answer = await advancedAnswer(
      new ExtractiveAnswerer(),
      "how does lift change with slipstream velocity?",
      items,
      "accurate",
      new UsageMeter(),
    );
    expect(answer).toMatchObject({ model: "loom/extractive", extractive: true });
    expect(answer.text).toContain("[1]");
  });
});

describe("query options: rerank and summaries", () => {
  it("reranks only the first num_chunks_to_rerank items and keeps the rest after them", async () => {
    const org = await seedOrg();
    await connect(org, { name: "cohere", kind: "cohere", secret: "co-1" });
    const net = new FakeNetwork().on("https://api.cohere.com/v2/rerank", cohereRerank);
    const reranked = await rerankItems(
      await rerankerFor(env, org, undefined, { fetch: net.fetch }),
      "heat slabs",
      items,
      2,
    );
    expect(reranked.map((i) => i.id)).toEqual(["c2", "c1", "c3"]);
    expect(reranked[0]?.score).toBe(1);
    expect(net.received[0]?.json?.documents).toHaveLength(2);
  });

  it("summarises each document once and serves the cache until its content changes", async () => {
    const org = await openAiOrg();
    let n = 0;
    const net = scriptedOpenAi(() => `Summary ${++n}.`);
    const model = await chatModelFor(env, org, undefined, { fetch: net.fetch });
    const cache = d1SummaryCache(env);
    const first = await summarizeDocuments(
      model,
      org.orgId,
      [
        { documentId: "doc-a", contentHash: "h1", text: "Alpha" },
        { documentId: "doc-b", contentHash: "h1", text: "Beta" },
      ],
      cache,
      new UsageMeter(),
    );
    expect(Object.keys(first).sort()).toEqual(["doc-a", "doc-b"]);
    expect(net.received).toHaveLength(2);
    const again = await summarizeDocuments(
      model,
      org.orgId,
      [{ documentId: "doc-a", contentHash: "h1", text: "Alpha" }],
      cache,
      new UsageMeter(),
    );
    expect(again["doc-a"]).toBe(first["doc-a"]);
    expect(net.received).toHaveLength(2);
    const changed = await summarizeDocuments(
      model,
      org.orgId,
      [{ documentId: "doc-a", contentHash: "h2", text: "Alpha v2" }],
      cache,
      new UsageMeter(),
    );
    expect(changed["doc-a"]).toBe("Summary 3.");
    // Another organization never reads this one's cached summaries.
    const other = await seedOrg();
    expect((await cache.get(other.orgId, model.model, ["doc-a"])).size).toBe(0);
  });
});
