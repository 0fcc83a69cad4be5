import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { b64, createKb, fileData, indexText, post, query, send, type Body } from "./kb-fixtures";
import { makePdf } from "./documents";

const failed = (error: string) => ({ status: "failed", error });

async function ownerKb(body: Body = {}) {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  return { org, key, kb: await createKb(key, body) };
}

describe("knowledge bases: create and fetch errors", () => {
  it("refuses a duplicate name with 409", async () => {
    const org = await seedOrg();
    await post("/v1/knowledge-base", org.owner.apiKey, { name: "dup" });
    expect(await post("/v1/knowledge-base", org.owner.apiKey, { name: "dup" })).toEqual({
      status: 409,
      body: failed("you already have a knowledge base named 'dup'"),
    });
  });

  it("checks chunk bounds and chunk_overlap < chunk_size", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    expect(await post("/v1/knowledge-base", key, { name: "a", chunk_size: 100, chunk_overlap: 100 })).toEqual({
      status: 400,
      body: failed("chunk_overlap: chunk_overlap must be less than chunk_size"),
    });
    const small = await post("/v1/knowledge-base", key, { name: "b", chunk_size: 8 });
    expect(small.status).toBe(400);
    expect(String(small.body.error)).toMatch(/^chunk_size: /);
    const big = await post("/v1/knowledge-base", key, { name: "c", chunk_size: 100000 });
    expect(big.status).toBe(400);
    expect((await post("/v1/knowledge-base", key, { name: "d", chunk_overlap: -1 })).status).toBe(400);
    expect((await post("/v1/knowledge-base", key, { name: "e", file_processing_implementation: "Fancy" })).status).toBe(
      400,
    );
  });

  it("names a missing name and an unknown embedding model", async () => {
    const org = await seedOrg();
    const missing = await post("/v1/knowledge-base", org.owner.apiKey, {});
    expect(missing.status).toBe(400);
    expect(String(missing.body.error)).toMatch(/^name: /);
    expect(await post("/v1/knowledge-base", org.owner.apiKey, { name: "x", embedding_model: "nope/model" })).toEqual({
      status: 400,
      body: failed("unknown embedding model: nope/model (available: loom/static-use-256)"),
    });
  });

  it("fetch needs an id or a name, and answers 404 for unknown ones", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    expect(await send("/v1/knowledge-base", key)).toEqual({
      status: 400,
      body: failed("Either id or name must be provided"),
    });
    expect(await send("/v1/knowledge-base?id=0123456789abcdef01234567", key)).toEqual({
      status: 404,
      body: failed("knowledge base not found"),
    });
    expect(await send("/v1/knowledge-base?name=never", key)).toEqual({
      status: 404,
      body: failed("knowledge base not found"),
    });
    expect((await send("/v1/knowledge-base?id=not-an-id", key)).status).toBe(400);
    expect(await send("/v1/knowledge-base/0123456789abcdef01234567", key, { method: "DELETE" })).toEqual({
      status: 404,
      body: failed("knowledge base not found"),
    });
  });
});

describe("knowledge bases: indexing errors", () => {
  it("refuses a document that would take a knowledge base past its chunk limit, queueing nothing", async () => {
    const { key, kb } = await ownerKb();
    await indexText(key, kb, "kept.txt", "Glaciers carve valleys over thousands of years.");
    const stub = env.KB_INDEX.get(env.KB_INDEX.idFromName(kb));
    // 10,000,000 chunks is the default limit with Loom's own (sharded) index (KB_MAX_CHUNKS).
    const limit = env.KB_VECTOR_BACKEND === "vectorize" ? 1_000_000 : 10_000_000;
    const chunk = { id: "x-0", documentId: "x", position: 0, text: "Too many chunks.", metadata: {} };
    const result = await stub.ingest(
      { kbId: kb, documentId: "x", embeddingModel: "loom/static-use-256", chunks: [chunk] },
      { reset: true, start: true, total: limit },
    );
    expect(result).toEqual({
      status: "failed",
      error: `the knowledge base holds 1 chunk and this document gives ${limit}; the limit is ${limit} chunks per knowledge base (KB_MAX_CHUNKS)`,
    });
    expect(await stub.stats()).toMatchObject({ chunks: 1, pending: 0 });
    const q = await query(key, kb, { queries: ["glaciers valleys"] });
    expect(q.items).toHaveLength(1);
  });

  it("answers 400 naming a type it cannot read, and stores nothing", async () => {
    const { key, kb } = await ownerKb();
    const res = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("photo.png", "image/png", new Uint8Array([0x89, 0x50, 0x4e, 0x47])),
    );
    expect(res).toEqual({
      status: 400,
      body: failed("unsupported file type: image/png (Loom reads plain text, Markdown, HTML, CSV, JSON, PDF and DOCX)"),
    });
    const noMime = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: { file: { raw_bytes: b64("x"), metadata: { name: "archive.xyz" } } },
    });
    expect(noMime.body).toEqual(
      failed("unsupported file type: .xyz (Loom reads plain text, Markdown, HTML, CSV, JSON, PDF and DOCX)"),
    );
    expect((await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents).toEqual([]);
  });

  it("refuses a corrupt file in the request itself with its reason, stores nothing of it, and keeps the rest searchable", async () => {
    const { key, kb } = await ownerKb();
    const good = await indexText(key, kb, "good.txt", "Healthy documents stay searchable.");
    const broken = makePdf(["Half a file"]).slice(0, 60);
    const pdf = await post(`/v1/knowledge-base/${kb}/index`, key, fileData("broken.pdf", "application/pdf", broken));
    expect(pdf.status).toBe(400);
    const docx = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData(
        "broken.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "not a zip at all",
      ),
    );
    const json = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("broken.json", "application/json", "{ nope"),
    );
    const latin1 = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("bad.txt", "text/plain", new Uint8Array([0x66, 0xff, 0xfe, 0x00, 0xc3])),
    );
    const empty = await post(`/v1/knowledge-base/${kb}/index`, key, fileData("blank.md", "text/markdown", "   \n\n  "));
    expect(pdf.body).toMatchObject({
      status: "failed",
      error: expect.stringMatching(
        /^file_data\.file \('broken\.pdf'\) cannot be indexed: the PDF file is corrupt or unreadable/,
      ),
    });
    expect(docx).toEqual({
      status: 400,
      body: failed(
        "file_data.file ('broken.docx') cannot be indexed: the DOCX file is corrupt (not a readable zip archive)",
      ),
    });
    expect(json).toEqual({
      status: 400,
      body: failed("file_data.file ('broken.json') cannot be indexed: the file is not valid JSON"),
    });
    expect(latin1).toEqual({
      status: 400,
      body: failed("file_data.file ('bad.txt') cannot be indexed: the file is not valid UTF-8 text"),
    });
    expect(empty).toEqual({
      status: 400,
      body: failed("file_data.file ('blank.md') cannot be indexed: no text could be extracted from this document"),
    });
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(docs.map((d) => d._id)).toEqual([good]);
    expect(docs[0]).toMatchObject({ status: "ready" });
    const q = await query(key, kb, { queries: ["healthy documents"] });
    expect(q.items[0].document_id).toBe(good);
  });

  it("refuses bad base64, empty files, oversize files and empty requests", async () => {
    const { key, kb } = await ownerKb();
    const url = `/v1/knowledge-base/${kb}/index`;
    expect(
      await post(url, key, { file_data: { file: { raw_bytes: "@@not base64@@", metadata: { name: "a.txt" } } } }),
    ).toEqual({ status: 400, body: failed("file_data.file.raw_bytes: not valid base64") });
    expect(await post(url, key, { file_data: { file: { raw_bytes: "", metadata: { name: "a.txt" } } } })).toEqual({
      status: 400,
      body: failed("file_data.file.raw_bytes: must not be empty"),
    });
    const huge = "A".repeat(28 * 1024 * 1024);
    expect(await post(url, key, { file_data: { file: { raw_bytes: huge, metadata: { name: "a.txt" } } } })).toEqual({
      status: 413,
      body: failed("file_data.file.raw_bytes: the file exceeds 20971520 bytes"),
    });
    expect(await post(url, key, {})).toEqual({
      status: 400,
      body: failed("give file_data, url_data, encyclopedia, video or preprint to index"),
    });
    expect(
      await post(url, key, { ...fileData("a.txt", "text/plain", "hi"), config: { chunk_size: 50, chunk_overlap: 60 } }),
    ).toEqual({ status: 400, body: failed("config.chunk_overlap: must be less than chunk_size") });
    expect(
      await post(url, key, { ...fileData("a.txt", "text/plain", "hi"), config: { enrichment_tasks: ["summarise"] } }),
    ).toEqual({
      status: 400,
      body: failed("config.enrichment_tasks: Loom does not run enrichment tasks yet; send an empty list"),
    });
    const unknownConfig = await post(url, key, {
      ...fileData("a.txt", "text/plain", "hi"),
      config: { chunk_sise: 10 },
    });
    // A typo in the config is named, not refused (issue 16: unknown Group A fields answer as before, plus a warning).
    expect(unknownConfig.status).toBe(200);
    expect(unknownConfig.body.warnings).toEqual(["unknown field config.chunk_sise ignored"]);
    const malformed = await send(url, key, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(malformed).toEqual({ status: 400, body: failed("request body is not valid JSON") });
  });

  it("answers 404 for documents that are not in the knowledge base", async () => {
    const { key, kb } = await ownerKb();
    const res = await send(`/v1/knowledge-base/${kb}/documents?document_ids=0123456789abcdef01234567`, key, {
      method: "DELETE",
    });
    expect(res).toEqual({ status: 404, body: failed("document 0123456789abcdef01234567 not found") });
    expect(await send(`/v1/knowledge-base/${kb}/documents?document_ids=nope`, key, { method: "DELETE" })).toEqual({
      status: 400,
      body: failed("document_ids: 'nope' is not a 24-character hex id"),
    });
  });
});

describe("knowledge bases: query errors", () => {
  it("uses CONTRACT.md's exact messages for retrieval unit and advanced QA mode", async () => {
    const { key, kb } = await ownerKb();
    expect((await query(key, kb, { queries: ["x"], config: { retrieval_unit: "paragraphs" } })).body).toEqual(
      failed("invalid retrieval unit: paragraphs"),
    );
    expect(
      (await query(key, kb, { queries: ["x"], config: { question_answering_config: { advanced_qa_mode: "slow" } } }))
        .body,
    ).toEqual(failed("invalid advanced QA mode: slow"));
  });

  it("refuses to query with another embedding model than the knowledge base was indexed with", async () => {
    const { key, kb } = await ownerKb();
    expect(await query(key, kb, { queries: ["x"], config: { embedding_model: "other/model-768" } })).toMatchObject({
      status: 409,
      body: failed(
        "this knowledge base was indexed with loom/static-use-256; it cannot be queried with other/model-768",
      ),
    });
    expect((await query(key, kb, { queries: ["x"], config: { embedding_model: "loom/static-use-256" } })).status).toBe(
      200,
    );
  });

  it("answers 400 naming the connection each generative option needs (expand_query and do_advanced_qa work offline)", async () => {
    const { key, kb } = await ownerKb();
    for (const option of [
      "transform_query",
      "answer_multi_query",
      "generate_metadata_filters",
      "generate_ai_doc_summaries",
    ]) {
      const res = await query(key, kb, { queries: ["x"], config: { [option]: true } });
      expect(res).toMatchObject({
        status: 400,
        body: failed(
          `config.${option} needs a chat model: add a connection of kind openai, anthropic or workers_ai (POST /admin/connections/create) or name a model as <connection>/<model>`,
        ),
      });
    }
    expect((await query(key, kb, { queries: ["x"], config: { rerank_documents: true } })).body).toEqual(
      failed(
        "config.rerank_documents needs a rerank model: add a connection of kind cohere or workers_ai (POST /admin/connections/create) or name a model as <connection>/<model>",
      ),
    );
    for (const option of ["expand_query", "do_advanced_qa"])
      expect((await query(key, kb, { queries: ["x"], config: { [option]: true } })).status).toBe(200);
  });

  it("says where a filter does not parse, in both languages", async () => {
    const { key, kb } = await ownerKb();
    const cases: [Body, string][] = [
      [{ filter: "{not json" }, "search_metadata.filter is invalid at the top level: filter is not valid JSON"],
      [
        {
          filter: JSON.stringify({
            must: [
              { key: "a", match: { value: "x" } },
              { key: "b", range: "high" },
            ],
          }),
        },
        "search_metadata.filter is invalid at must[1].range: range must be an object with gt, gte, lt or lte",
      ],
      [
        { filter: JSON.stringify({ must: [{ key: "a" }] }) },
        "search_metadata.filter is invalid at must[0]: a condition needs match, range, is_empty or a nested filter",
      ],
      [
        { filter: JSON.stringify({ sometimes: [] }) },
        "search_metadata.filter is invalid at sometimes: unknown clause (use must, should, must_not)",
      ],
      [
        { searchengine_filter: JSON.stringify({ bool: { must: [{ wildcard: { a: "x*" } }] } }) },
        "search_metadata.searchengine_filter is invalid at bool.must[0].wildcard: unsupported query kind (use bool, term, terms, match, range, exists, prefix)",
      ],
      [
        { opensearch_filter: JSON.stringify({ term: { a: "x", b: "y" } }) },
        "search_metadata.opensearch_filter is invalid at term: must name exactly one field",
      ],
      [
        { searchengine_filter: JSON.stringify({ range: { year: { above: 3 } } }) },
        "search_metadata.searchengine_filter is invalid at range.year.above: unknown range bound (use gt, gte, lt, lte)",
      ],
    ];
    for (const [meta, message] of cases) {
      const res = await query(key, kb, { queries: ["x"], search_metadata: meta });
      expect(res.status, JSON.stringify(meta)).toBe(400);
      expect(String(res.body.error)).toContain(message);
    }
  });

  it("bounds top_k, the number of queries and their presence", async () => {
    const { key, kb } = await ownerKb();
    expect((await query(key, kb, { queries: ["x"], search_metadata: { top_k: 0 } })).status).toBe(400);
    expect((await query(key, kb, { queries: ["x"], search_metadata: { top_k: 101 } })).status).toBe(400);
    expect((await query(key, kb, { queries: Array.from({ length: 11 }, () => "x") })).status).toBe(400);
    expect((await query(key, kb, { queries: [] })).body).toEqual(failed("queries: give at least one non-empty query"));
    expect((await query(key, kb, {})).body).toEqual(failed("queries: give at least one non-empty query"));
    expect((await query(key, kb, { queries: ["x"], config: { hybrid_search_config: { alpha: 2 } } })).status).toBe(400);
    expect(
      (await query(key, kb, { queries: ["x"], config: { hybrid_search_config: { fusion_method: "borda" } } })).status,
    ).toBe(400);
    expect(
      (await query(key, kb, { queries: ["x"], config: { retrieval_config: { data_fusion_method: "sum" } } })).status,
    ).toBe(400);
    expect((await query(key, kb, { queries: ["x"], search_metadata: { filter: "x".repeat(20000) } })).status).toBe(400);
  });
});
