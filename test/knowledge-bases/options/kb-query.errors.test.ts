import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg, type Org } from "../../helpers";
import type { AuthContext } from "../../../src/env";
import { queryWithModelOptions } from "../../../src/features/knowledge-bases/options/knowledge-base-query";
import { QueryBody } from "../../../src/features/knowledge-bases/knowledge-bases.schemas";
import { createKb, query, seedCorpus, type Body } from "../kb-fixtures";
import { connect } from "../../providers/connect";
import { FakeNetwork, openAiCompletion } from "../../providers/fake-providers";

const failed = (error: string) => ({ status: "failed", error });
const authOf = (org: Org): AuthContext => ({
  userId: org.owner.userId,
  orgId: org.orgId,
  role: "owner",
  via: "api_key",
});

async function kbWithCorpus() {
  const org = await seedOrg();
  const kb = await createKb(org.owner.apiKey);
  const ids = await seedCorpus(org.owner.apiKey, kb);
  return { org, kb, ids, key: org.owner.apiKey };
}

describe("knowledge-base query options: errors", () => {
  it("an option that needs a generative model answers 400 naming the connection kinds to add", async () => {
    const { kb, key } = await kbWithCorpus();
    for (const option of [
      "transform_query",
      "answer_multi_query",
      "generate_metadata_filters",
      "generate_ai_doc_summaries",
    ]) {
      const res = await query(key, kb, { query: "whales", config: { [option]: true } });
      expect(res).toMatchObject({
        status: 400,
        body: failed(
          `config.${option} needs a chat model: add a connection of kind openai, anthropic or workers_ai (POST /admin/connections/create) or name a model as <connection>/<model>`,
        ),
      });
    }
    expect((await query(key, kb, { query: "whales", config: { rerank_documents: true } })).body).toEqual(
      failed(
        "config.rerank_documents needs a rerank model: add a connection of kind cohere or workers_ai (POST /admin/connections/create) or name a model as <connection>/<model>",
      ),
    );
    expect(
      (
        await query(key, kb, {
          query: "whales",
          config: { do_advanced_qa: true, question_answering_config: { qa_model: "nope/gpt" } },
        })
      ).body,
    ).toEqual(failed("model 'nope/gpt': this organization has no connection named 'nope'"));
  });

  it("validates the rest of the request before any model is called", async () => {
    const { org, kb } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-val-1" });
    const net = new FakeNetwork().on("https://api.openai.com/", () => openAiCompletion("x"));
    for (const [config, message] of [
      [{ transform_query: true, retrieval_unit: "paragraphs" }, "invalid retrieval unit: paragraphs"],
      [
        { do_advanced_qa: true, question_answering_config: { advanced_qa_mode: "slow" } },
        "invalid advanced QA mode: slow",
      ],
    ] as const) {
      const error = await queryWithModelOptions(env, authOf(org), kb, QueryBody.parse({ query: "whales", config }), {
        fetch: net.fetch,
      }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error?.message).toBe(message);
    }
    expect(net.received).toHaveLength(0);
  });

  it("a provider that fails answers the documented 502 through the route", async () => {
    const { org, kb, key } = await kbWithCorpus();
    // Nothing listens on the discard port: every attempt fails, the retries run out, the route answers 502.
    await connect(org, { name: "dead", kind: "openai", base_url: "http://127.0.0.1:9/v1", chat_model: "m" });
    const res = await query(key, kb, { query: "whales", config: { transform_query: true } });
    expect(res.status).toBe(502);
    expect(res.body.status).toBe("failed");
    expect(String(res.body.error)).toMatch(/^the model provider openai \(connection 'dead'\) failed: /);
  });

  it("a proposed filter on keys the knowledge base lacks, or one that does not compile, is reported and not applied", async () => {
    const { org, kb } = await kbWithCorpus();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-val-2" });
    const proposals = [
      '{"must": [{"key": "owner_password", "match": {"value": "x"}}]}',
      '{"must": [{"key": "topic", "match": {"value": {"$ne": 1}}}]}',
    ];
    const net = new FakeNetwork().on("https://api.openai.com/", () => openAiCompletion(proposals.shift() ?? "{}"));
    const unknownKey = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      QueryBody.parse({ query: "crust rupture", config: { generate_metadata_filters: true } }),
      { fetch: net.fetch },
    );
    expect(unknownKey.generated_filter).toEqual({
      rejected: "the key 'owner_password' is not in this knowledge base's metadata",
    });
    expect((unknownKey.chunks ?? []).length).toBeGreaterThan(1);
    const broken = await queryWithModelOptions(
      env,
      authOf(org),
      kb,
      QueryBody.parse({ query: "crust rupture", config: { generate_metadata_filters: true } }),
      { fetch: net.fetch },
    );
    expect(broken.generated_filter).toMatchObject({
      rejected: expect.stringMatching(/^the proposed filter did not compile: /) as unknown as string,
    });
    expect((broken.chunks ?? []).length).toBeGreaterThan(1);
  });
});

describe("knowledge-base query options: body shapes", () => {
  it("accepts the options as form fields too", async () => {
    const { kb, key } = await kbWithCorpus();
    const res = await query(key, kb, {
      query: "how do whales breathe",
      config: JSON.stringify({ do_advanced_qa: "true" }),
    } as Body);
    expect(res.status).toBe(200);
    expect((res.body.result as Body).response).toContain("[1]");
  });
});
