import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { parseRequestBody } from "../../src/lib/body";
import { IndexBody } from "../../src/features/knowledge-bases/knowledge-bases.schemas";
import { env } from "cloudflare:test";
import {
  DEFAULT_INDEXING_CONFIG,
  sdkIndexFile,
  sdkIndexUrl,
  sdkNewKnowledgeBase,
  sdkQuery,
  sdkRequest,
  type Body,
} from "./sdk-wire";

const WHALES =
  "Whales are marine mammals. The blue whale is the largest animal known to have ever existed. Whales breathe air through blowholes.";
const BREAD =
  "Sourdough bread is made by fermenting dough with wild yeast and lactobacilli. The starter gives the bread its sour taste.";

describe("the hosted SDK's KnowledgeBase against Loom", () => {
  it("index_document('file') sends a multipart form with file_data=true, dotted metadata and a file part; the document keeps its name, type and custom metadata", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    const indexed = await sdkIndexFile(
      key,
      kb,
      { name: "whales.md", mime: "text/markdown", content: `# Whales\n\n${WHALES}` },
      { customMetadata: { team: "ocean", year: 2024 } },
    );
    expect(indexed.status).toBe(200);
    expect(indexed.body.status).toBe("success");
    const ids = indexed.body.document_ids as string[];
    expect(ids).toHaveLength(1);

    const listed = await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`);
    const doc = (listed.body.documents as Body[])[0];
    // The SDK's file_data.metadata names the file (the part itself carries no content type).
    expect(doc).toMatchObject({
      _id: ids[0],
      name: "whales.md",
      mimeType: "text/markdown",
      status: "ready",
      customMetadata: { team: "ocean", year: 2024 },
    });

    const found = await sdkQuery(key, kb, ["blue whale"], {
      searchMetadata: { filter: JSON.stringify({ must: [{ key: "team", match: { value: "ocean" } }] }) },
    });
    expect(found.status).toBe(200);
    const chunks = (found.body.result as Body).chunks as Body[];
    expect(chunks[0]).toMatchObject({ document_id: ids[0] });
    expect(chunks[0].metadata).toMatchObject({ team: "ocean", name: "whales.md" });
  });

  it("index_document('file') with an IndexingConfig: chunk_size and chunk_overlap apply, apify_key is taken as scraper_api_key", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    const long = Array.from({ length: 40 }, (_, i) => `Sentence ${i} about whales and their songs.`).join(" ");
    const config = { ...DEFAULT_INDEXING_CONFIG, chunk_size: 30, chunk_overlap: 5, apify_key: "apify_api_abc123" };
    const indexed = await sdkIndexFile(key, kb, { name: "songs.txt", mime: "text/plain", content: long }, { config });
    expect(indexed.status).toBe(200);
    const doc = ((await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`)).body.documents as Body[])[0];
    // About 400 tokens in chunks of 30 overlapping by 5: many chunks, where the default 400 would give one or two.
    expect(doc.chunkCount as number).toBeGreaterThan(10);
  });

  it("query sends all 14 config keys and the search_metadata options as null: null is 'not set', so it answers like a query without them", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    for (const [name, text] of [
      ["whales.txt", WHALES],
      ["bread.txt", BREAD],
    ])
      expect((await sdkIndexFile(key, kb, { name, mime: "text/plain", content: text })).status).toBe(200);

    const sdk = await sdkQuery(key, kb, ["how do whales breathe"]);
    expect(sdk.status).toBe(200);
    expect(sdk.body.status).toBe("success");
    const chunks = (sdk.body.result as Body).chunks as Body[];
    expect(chunks.length).toBeGreaterThan(0);
    expect(String(chunks[0].text)).toContain("blowholes");

    const plain = await sdkRequest(key, "POST", `/knowledge-base/${kb}/query`, {
      json: { queries: ["how do whales breathe"], search_metadata: { top_k: 5 } },
    });
    expect(((plain.body.result as Body).chunks as Body[]).map((c) => c.id)).toEqual(chunks.map((c) => c.id));
  });

  it("query with some options set and the rest null uses the ones set", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    for (const [name, text] of [
      ["whales.txt", WHALES],
      ["bread.txt", BREAD],
    ])
      await sdkIndexFile(key, kb, { name, mime: "text/plain", content: text });
    const res = await sdkQuery(key, kb, ["whales", "bread"], {
      searchMetadata: { top_k: 1 },
      config: {
        retrieval_unit: "documents",
        format_context_for_llm: true,
        retrieval_config: { max_documents: 5, data_fusion_method: null },
        hybrid_search_config: { alpha: null, fusion_method: "rrf" },
      },
    });
    expect(res.status).toBe(200);
    const result = res.body.result as Body;
    expect(result.documents as Body[]).toHaveLength(1);
    expect(typeof result.formatted_text).toBe("string");
  });

  it("index_document('wikipedia') JSON with the default IndexingConfig (nulls) validates as the seed's index body", async () => {
    const body = { wikipedia: "https://en.wikipedia.org/wiki/Whale", config: DEFAULT_INDEXING_CONFIG };
    const parsed = IndexBody.safeParse(
      await parseRequestBody(
        new Request("http://loom.test/", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      ),
    );
    expect(parsed.success).toBe(true);
    expect(parsed.data?.config).toEqual({
      index_tables: false,
      analyze_documents: false,
      file_processing_implementation: "Default",
    });
  });

  it("index_document('url') with the SDK's defaults (recursive, CHUNKS, Never) and with every option set indexes the page", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    const site = `sdk-${crypto.randomUUID().slice(0, 8)}.example.com`;
    await env.FAKE_WEB.publish(`https://${site}/whales`, {
      headers: { "content-type": "text/html" },
      body: `<html><head><title>Whales</title></head><body><p>${WHALES}</p></body></html>`,
    });
    const plain = await sdkIndexUrl(key, kb, `https://${site}/whales`);
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({ status: "success", document_ids: [expect.any(String)] });
    const all = await sdkIndexUrl(key, kb, `https://${site}/whales`, {
      recursive: false,
      return_type: "CONTENT",
      recursive_url_limit: 5,
      ai_enhance_content: true,
      apify_key: "apify_api_xyz",
      rescrape_frequency: "Weekly",
    });
    expect(all.status).toBe(200);
    const docs = (await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`)).body.documents as Body[];
    expect(docs[0]).toMatchObject({ name: "Whales", source: "url", status: "ready" });
    expect(JSON.stringify(docs)).not.toContain("apify_api_xyz");
    const found = await sdkQuery(key, kb, ["blue whale"]);
    expect(String(((found.body.result as Body).chunks as Body[])[0].text)).toContain("blue whale");
  });

  it("find_documents(title=...) answers the matching document_ids; folder and integration filters match nothing in Loom", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key);
    const whales = (
      (await sdkIndexFile(key, kb, { name: "whales.txt", mime: "text/plain", content: WHALES })).body
        .document_ids as string[]
    )[0];
    await sdkIndexFile(key, kb, { name: "bread.txt", mime: "text/plain", content: BREAD });

    const byTitle = await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`, { query: { title: "whales.txt" } });
    expect(byTitle.status).toBe(200);
    expect(byTitle.body.document_ids).toEqual([whales]);
    expect((byTitle.body.documents as Body[]).map((d) => d.name)).toEqual(["whales.txt"]);

    expect(
      (await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`, { query: { title: "whales" } })).body
        .document_ids,
    ).toEqual([]);
    expect(
      (
        await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`, {
          query: { folder_id: "6650f0c2a1b2c3d4e5f60718" },
        })
      ).body.document_ids,
    ).toEqual([]);
    expect(
      (
        await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`, {
          query: { title: "whales.txt", integration_id: "6650f0c2a1b2c3d4e5f60718" },
        })
      ).body.document_ids,
    ).toEqual([]);
    // Without filters (Loom's own listing) every document is there.
    expect(
      (await sdkRequest(key, "GET", `/knowledge-base/${kb}/documents`)).body.document_ids as string[],
    ).toHaveLength(2);
  });

  it("new, fetch, delete_documents and delete answer what the SDK reads", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await sdkNewKnowledgeBase(key, "sdk-kb");
    const fetched = await sdkRequest(key, "GET", "/knowledge-base", { query: { name: "sdk-kb" } });
    expect(fetched.body.object).toMatchObject({
      _id: kb,
      name: "sdk-kb",
      fileProcessingImplementation: "Default",
      chunkSize: 400,
      chunkOverlap: 0,
      analyzeDocuments: false,
    });
    const doc = (
      (await sdkIndexFile(key, kb, { name: "whales.txt", mime: "text/plain", content: WHALES })).body
        .document_ids as string[]
    )[0];
    expect(
      (await sdkRequest(key, "DELETE", `/knowledge-base/${kb}/documents`, { query: { document_ids: doc } })).body,
    ).toEqual({ status: "success", document_ids: [doc] });
    expect((await sdkRequest(key, "DELETE", `/knowledge-base/${kb}`)).body).toEqual({ status: "success" });
  });
});
