import { env, evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, seedOrg } from "../helpers";
import { createKb, fileData, indexText, post, query, seedCorpus, send, CORPUS, type Body } from "./kb-fixtures";
import { makeDocx, makePdf } from "./documents";
import { readOriginal } from "../../src/features/knowledge-bases/originals";

const kbStub = (kbId: string) => env.KB_INDEX.get(env.KB_INDEX.idFromName(kbId));

/** A fresh organization's knowledge base holding the four CORPUS documents. */
async function corpusKb() {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  const kb = await createKb(key);
  const ids = await seedCorpus(key, kb);
  return { key, kb, ids };
}

/** Originals its index object keeps beside their chunks (small files, issue 14). */
async function originalsInIndex(kbId: string): Promise<number> {
  return runInDurableObject(
    kbStub(kbId),
    (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM originals").one().n,
  );
}

/** Vectors a knowledge base holds, wherever this test project keeps them (see vitest.config.ts). */
async function storedVectors(kbId: string): Promise<number> {
  if (env.KB_VECTOR_BACKEND !== "vectorize") return (await kbStub(kbId).stats()).vectors;
  return (env.VECTORIZE as unknown as { countIn(namespace: string): Promise<number> }).countIn(kbId);
}

describe("knowledge bases: records", () => {
  it("creates with defaults, fetches by id and by name, lists, and deletes", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const created = await post("/v1/knowledge-base", key, { name: "handbook", description: "Team handbook" });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ status: "success", id: expect.stringMatching(/^[0-9a-f]{24}$/) });
    const id = String(created.body.id);

    const byId = await send(`/v1/knowledge-base?id=${id}`, key);
    expect(byId.status).toBe(200);
    expect(byId.body.object).toMatchObject({
      _id: id,
      name: "handbook",
      description: "Team handbook",
      chunkSize: 400,
      chunkOverlap: 0,
      fileProcessingImplementation: "Default",
      analyzeDocuments: false,
      isHybrid: true,
      embeddingModel: "loom/static-use-256",
      ownerId: org.owner.userId,
      orgId: org.orgId,
    });
    const byName = await send(`/v1/knowledge-base?name=handbook`, key);
    expect((byName.body.object as Body)._id).toBe(id);

    const list = await send("/v1/knowledge-bases", key);
    expect(list.body).toEqual({ status: "success", object_ids: [id], objects: [] });
    const verbose = await send("/v1/knowledge-bases?verbose=true", key);
    expect((verbose.body.objects as Body[])[0]).toMatchObject({ _id: id, name: "handbook" });

    const removed = await send(`/v1/knowledge-base/${id}`, key, { method: "DELETE" });
    expect(removed).toEqual({ status: 200, body: { status: "success" } });
    expect((await send(`/v1/knowledge-base?id=${id}`, key)).status).toBe(404);
  });

  it("accepts the same body as form fields (multipart and urlencoded)", async () => {
    const org = await seedOrg();
    const form = new FormData();
    form.set("name", "from-multipart");
    form.set("chunk_size", "200");
    form.set("chunk_overlap", "20");
    form.set("is_hybrid", "false");
    const res = await call("/v1/knowledge-base", {
      method: "POST",
      headers: { authorization: `Bearer ${org.owner.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(200);
    const id = ((await res.json()) as Body).id;
    const fetched = await send(`/v1/knowledge-base?id=${String(id)}`, org.owner.apiKey);
    expect(fetched.body.object).toMatchObject({ chunkSize: 200, chunkOverlap: 20, isHybrid: false });
  });

  it("deleting a knowledge base removes its documents, chunks, vectors and stored files", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await seedCorpus(key, kb);
    // One original too large to be kept beside its chunks goes to R2; the four small ones stay in the index object.
    await indexText(key, kb, "long.txt", "Long text about harbours and tides. ".repeat(600));
    const listed = await env.FILES.list({ prefix: `knowledge-bases/${kb}/` });
    expect(listed.objects.length).toBe(1);
    expect(await originalsInIndex(kb)).toBe(4);
    expect((await kbStub(kb).stats()).chunks).toBeGreaterThan(4);
    expect(await storedVectors(kb)).toBeGreaterThan(4);
    expect((await send(`/v1/knowledge-base/${kb}`, key, { method: "DELETE" })).status).toBe(200);
    expect((await env.FILES.list({ prefix: `knowledge-bases/${kb}/` })).objects.length).toBe(0);
    expect(await originalsInIndex(kb)).toBe(0);
    expect((await kbStub(kb).stats()).chunks).toBe(0);
    expect(await storedVectors(kb)).toBe(0);
  });
});

describe("knowledge bases: documents", () => {
  it("lists documents with their state and deletes some with their chunks and files", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const ids = await seedCorpus(key, kb);
    const docs = await send(`/v1/knowledge-base/${kb}/documents`, key);
    expect(docs.status).toBe(200);
    const list = docs.body.documents as Body[];
    expect(list).toHaveLength(4);
    expect(list.every((d) => d.status === "ready" && d.chunkCount === 1 && d.error === null)).toBe(true);
    expect(list.find((d) => d._id === ids.whales)).toMatchObject({
      name: "whales.txt",
      mimeType: "text/plain",
      source: "file",
      customMetadata: CORPUS.whales.meta,
    });

    const del = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${ids.whales},${ids.bread}`, key, {
      method: "DELETE",
    });
    expect(del.body).toEqual({ status: "success", document_ids: [ids.whales, ids.bread] });
    const after = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(after.map((d) => d._id).sort()).toEqual([ids.volcano, ids.rockets].sort());
    const q = await query(key, kb, {
      queries: ["whale blowholes"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(q.items).toHaveLength(0);
    expect((await env.FILES.list({ prefix: `knowledge-bases/${kb}/${ids.whales}/` })).objects.length).toBe(0);
    expect(await storedVectors(kb)).toBe(2);
  });

  it("does not duplicate identical content indexed twice", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const first = await indexText(key, kb, "a.txt", "Identical content is stored once.");
    const second = await indexText(key, kb, "a-copy.txt", "Identical content is stored once.");
    expect(second).toBe(first);
    expect((await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents).toHaveLength(1);
  });

  it("stores the original bytes in R2 under a server-generated key", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    // Past ORIGINAL_IN_INDEX_MAX_BYTES, so the original has an R2 object of its own.
    const text = "Path-like names never choose the storage key. ".repeat(400);
    const id = await indexText(org.owner.apiKey, kb, "../../etc/passwd", text);
    const stored = await env.FILES.get(`knowledge-bases/${kb}/${id}/original`);
    expect(await stored?.text()).toBe(text);
  });

  it("keeps a small original beside its chunks, readable as uploaded, and removes it with its document", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const text = "Path-like names never choose the storage key.";
    const id = await indexText(key, kb, "../../etc/passwd", text);
    const other = await indexText(key, kb, "other.txt", "Another small file.");
    const row = await env.DB.prepare("SELECT r2_key FROM kb_documents WHERE id = ?")
      .bind(id)
      .first<{ r2_key: string | null }>();
    expect(row).toEqual({ r2_key: null });
    expect((await env.FILES.list({ prefix: `knowledge-bases/${kb}/` })).objects).toHaveLength(0);
    const original = await readOriginal(env, kb, { id, r2Key: null });
    expect(new TextDecoder().decode(original ?? new Uint8Array())).toBe(text);
    // Another tenant's knowledge base never answers for this document.
    const stranger = await createKb((await seedOrg()).owner.apiKey);
    expect(await readOriginal(env, stranger, { id, r2Key: null })).toBeNull();
    expect(
      (await send(`/v1/knowledge-base/${kb}/documents?document_ids=${id}`, key, { method: "DELETE" })).status,
    ).toBe(200);
    expect(await readOriginal(env, kb, { id, r2Key: null })).toBeNull();
    expect(await originalsInIndex(kb)).toBe(1);
    expect(await readOriginal(env, kb, { id: other, r2Key: null })).not.toBeNull();
  });

  it("continues a large document from the Durable Object's alarm, with its state visible", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    const sentences = Array.from(
      { length: 1200 },
      (_, i) => `Sentence number ${i} talks about topic ${i % 7} in plain words.`,
    ).join(" ");
    const res = await post(`/v1/knowledge-base/${kb}/index`, key, fileData("big.txt", "text/plain", sentences));
    expect(res.status).toBe(200);
    const docId = (res.body.document_ids as string[])[0];
    const before = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(before[0], JSON.stringify(before[0])).toMatchObject({ _id: docId, status: "indexing" });
    // Eviction loses memory, not data: the alarm picks up the pending steps from SQLite.
    await evictDurableObject(kbStub(kb));
    while (await runDurableObjectAlarm(kbStub(kb))) {
      /* each alarm run is one step */
    }
    const after = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(after[0], JSON.stringify(after[0])).toMatchObject({ _id: docId, status: "ready", chunkCount: 1200 });
    const q = await query(key, kb, {
      queries: ["Sentence number 1199"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(q.items[0].text).toContain("Sentence number 1199");
  });
});

describe("knowledge bases: formats", () => {
  const cases: [string, string, string | Uint8Array, string][] = [
    ["notes.txt", "text/plain", "The lighthouse keeper logs every passing ship.", "lighthouse keeper"],
    [
      "guide.md",
      "text/markdown",
      "# Setup\n\nInstall the compressor first.\n\n## Running\n\nStart the turbine slowly.",
      "turbine",
    ],
    [
      "page.html",
      "text/html",
      "<html><head><style>.x{color:red}</style><script>var secret=1;</script></head><body><h1>Gardening</h1><p>Tomatoes need &amp; love sunlight.</p></body></html>",
      "tomatoes sunlight",
    ],
    ["table.csv", "text/csv", 'city,river\nParis,Seine\n"London, UK",Thames\n', "Thames"],
    [
      "data.json",
      "application/json",
      JSON.stringify({ planet: { name: "Mars", moons: ["Phobos", "Deimos"] } }),
      "Phobos",
    ],
    [
      "paper.pdf",
      "application/pdf",
      makePdf(["Glaciers carve valleys over millennia.", "Moraines mark where glaciers stopped."]),
      "moraines",
    ],
    [
      "report.docx",
      "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
      makeDocx("Quarterly report", ["Revenue grew in the northern region.", "Costs fell."]),
      "revenue northern",
    ],
  ];
  for (const [name, mime, content, search] of cases) {
    it(`indexes ${name} (${mime}) and finds its text`, async () => {
      const org = await seedOrg();
      const key = org.owner.apiKey;
      const kb = await createKb(key);
      const res = await post(`/v1/knowledge-base/${kb}/index`, key, fileData(name, mime, content, { team: "qa" }));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
      expect(docs[0], JSON.stringify(docs[0])).toMatchObject({ status: "ready", mimeType: mime });
      const q = await query(key, kb, { queries: [search], config: { retrieval_config: { search_mode: "keyword" } } });
      expect(q.items.length).toBeGreaterThan(0);
      expect(String(q.items[0].text).toLowerCase()).toContain(search.split(" ")[0].toLowerCase());
      expect(q.items[0].metadata).toMatchObject({
        team: "qa",
        name,
        path: `/docs/${name}`,
        mime_type: mime,
        source: "file",
      });
      expect(String(q.items[0].text)).not.toContain("secret");
    });
  }

  it("records the PDF page and the Markdown section on chunks", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("p.pdf", "application/pdf", makePdf(["Alpha page text.", "Beta page mentions moraines."])),
    );
    const q = await query(key, kb, { queries: ["moraines"], config: { retrieval_config: { search_mode: "keyword" } } });
    expect(q.items[0].metadata).toMatchObject({ page: 2 });
    await indexText(
      key,
      kb,
      "m.md",
      "# Intro\n\nHello there.\n\n## Usage\n\nRun the flux capacitor.",
      undefined,
      "text/markdown",
    );
    const m = await query(key, kb, {
      queries: ["flux capacitor"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(m.items[0].metadata).toMatchObject({ section: "Usage" });
  });

  it("takes a multipart file part as file_data.file", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const form = new FormData();
    form.set(
      "file_data.file",
      new File(["Multipart uploads reach the same index."], "upload.txt", { type: "text/plain" }),
    );
    form.set("file_data.custom_metadata", JSON.stringify({ channel: "form" }));
    const res = await call(`/v1/knowledge-base/${kb}/index`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(res.status).toBe(200);
    const q = await query(key, kb, { queries: ["multipart uploads"] });
    expect(q.items[0].metadata).toMatchObject({ channel: "form", name: "upload.txt" });
  });
});

describe("knowledge bases: query options", () => {
  it("runs keyword, vector and hybrid search (rrf and weighted)", async () => {
    const { key, kb, ids } = await corpusKb();
    for (const config of [
      { retrieval_config: { search_mode: "keyword" } },
      { retrieval_config: { search_mode: "vector" } },
      {},
      { hybrid_search_config: { fusion_method: "rrf" } },
      { hybrid_search_config: { fusion_method: "weighted", alpha: 0.5 } },
      { hybrid_search_config: { fusion_method: "weighted", alpha: 1 } },
      { hybrid_search_config: { fusion_method: "weighted", alpha: 0 } },
    ]) {
      const q = await query(key, kb, { queries: ["sourdough bread yeast"], config });
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      expect(q.items[0].document_id, JSON.stringify(config)).toBe(ids.bread);
    }
  });

  it("answers without search_metadata or config, with the items' shape", async () => {
    const { key, kb, ids } = await corpusKb();
    const q = await query(key, kb, { queries: ["volcanic ash magma"] });
    expect(q.body.status).toBe("success");
    expect(q.items[0]).toEqual({
      id: `${ids.volcano}-0`,
      document_id: ids.volcano,
      score: expect.any(Number),
      text: CORPUS.volcano.text,
      metadata: expect.objectContaining({ topic: "geology" }),
    });
    expect((q.body.result as Body).queries).toEqual(["volcanic ash magma"]);
    for (let i = 1; i < q.items.length; i++)
      expect(Number(q.items[i - 1].score)).toBeGreaterThanOrEqual(Number(q.items[i].score));
  });

  it("honours top_k and score_cutoff", async () => {
    const { key, kb } = await corpusKb();
    const two = await query(key, kb, {
      queries: ["the"],
      search_metadata: { top_k: 2 },
      config: { retrieval_config: { search_mode: "vector" } },
    });
    expect(two.items).toHaveLength(2);
    const all = await query(key, kb, { queries: ["whale"], config: { retrieval_config: { search_mode: "vector" } } });
    const cutoff = Number(all.items[0].score) - 1e-9;
    const cut = await query(key, kb, {
      queries: ["whale"],
      config: { score_cutoff: cutoff, retrieval_config: { search_mode: "vector" } },
    });
    expect(cut.items).toHaveLength(1);
    expect(cut.items.every((i) => Number(i.score) >= cutoff)).toBe(true);
  });

  it("fuses several queries with rrf or max", async () => {
    const { key, kb, ids } = await corpusKb();
    for (const method of ["rrf", "max"]) {
      const q = await query(key, kb, {
        queries: ["blue whale", "lava magma"],
        config: { retrieval_config: { data_fusion_method: method, search_mode: "keyword" } },
      });
      expect(q.status).toBe(200);
      expect(
        q.items
          .slice(0, 2)
          .map((i) => i.document_id)
          .sort(),
      ).toEqual([ids.whales, ids.volcano].sort());
    }
  });

  it("limits documents with max_documents and groups by a metadata key", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    const long = Array.from({ length: 6 }, (_, i) => `Comets have icy tails number ${i}.`).join(" ");
    await indexText(key, kb, "c1.txt", long, { team: "a" });
    await indexText(key, kb, "c2.txt", `${long} Again.`, { team: "a" });
    await indexText(key, kb, "c3.txt", `${long} Third.`, { team: "b" });
    const one = await query(key, kb, {
      queries: ["comets icy tails"],
      config: { retrieval_config: { max_documents: 1, search_mode: "keyword" } },
    });
    expect(new Set(one.items.map((i) => i.document_id)).size).toBe(1);
    expect(one.items.length).toBeGreaterThan(1);
    const grouped = await query(key, kb, {
      queries: ["comets icy tails"],
      search_metadata: { group_by_key: "team" },
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(grouped.items.map((i) => (i.metadata as Body).team).sort()).toEqual(["a", "b"]);
  });

  it("returns documents or pages as the retrieval unit (singular aliases too)", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const pdf = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData(
        "atlas.pdf",
        "application/pdf",
        makePdf(["Deserts receive little rain.", "Rainforests receive heavy rain daily."]),
      ),
    );
    const docId = (pdf.body.document_ids as string[])[0];
    const docs = await query(key, kb, {
      queries: ["rain"],
      config: { retrieval_unit: "documents", retrieval_config: { search_mode: "keyword" } },
    });
    expect((docs.body.result as Body).documents).toBeDefined();
    expect(docs.items).toHaveLength(1);
    expect(docs.items[0]).toMatchObject({ id: docId, document_id: docId });
    expect(String(docs.items[0].text)).toContain("Deserts");
    expect(String(docs.items[0].text)).toContain("Rainforests");
    const pages = await query(key, kb, {
      queries: ["rainforests"],
      config: { retrieval_unit: "page", retrieval_config: { search_mode: "keyword" } },
    });
    expect((pages.body.result as Body).pages).toBeDefined();
    expect(pages.items[0]).toMatchObject({
      id: `${docId}:p2`,
      document_id: docId,
      metadata: expect.objectContaining({ page: 2 }),
    });
    const chunk = await query(key, kb, { queries: ["rain"], config: { retrieval_unit: "chunk" } });
    expect((chunk.body.result as Body).chunks).toBeDefined();
  });

  it("formats numbered sources with citation metadata for a language model", async () => {
    const { key, kb, ids } = await corpusKb();
    const q = await query(key, kb, {
      queries: ["rocket engines vacuum"],
      search_metadata: { top_k: 2 },
      config: { format_context_for_llm: true },
    });
    const result = q.body.result as Body;
    expect(String(result.formatted_text)).toMatch(/\[1\] rockets\.txt, page 1\nRockets carry/);
    expect(String(result.formatted_text)).toContain("[2] ");
    expect((result.citation_metadata as Body[])[0]).toMatchObject({
      source_number: 1,
      document_id: ids.rockets,
      name: "rockets.txt",
      path: "/docs/rockets.txt",
      page: 1,
      source: "file",
    });
  });
});

describe("knowledge bases: filters", () => {
  const everything = "whales volcano bread rockets lava yeast space marine";

  const cases: [string, Body, (ids: Record<string, string>) => string[]][] = [
    [
      "qdrant match value",
      { filter: JSON.stringify({ must: [{ key: "topic", match: { value: "geology" } }] }) },
      (i) => [i.volcano],
    ],
    [
      "qdrant match any",
      { filter: JSON.stringify({ must: [{ key: "topic", match: { any: ["geology", "space"] } }] }) },
      (i) => [i.volcano, i.rockets],
    ],
    [
      "qdrant match except (excluding)",
      { filter: JSON.stringify({ must: [{ key: "topic", match: { except: ["geology", "space"] } }] }) },
      (i) => [i.whales, i.bread],
    ],
    [
      "qdrant must_not (excluding)",
      { filter: JSON.stringify({ must_not: [{ key: "tags", match: { value: "ocean" } }] }) },
      (i) => [i.volcano, i.bread, i.rockets],
    ],
    [
      "qdrant range",
      { filter: JSON.stringify({ must: [{ key: "year", range: { gte: 2020, lt: 2022 } }] }) },
      (i) => [i.whales, i.rockets],
    ],
    [
      "qdrant should",
      {
        filter: JSON.stringify({
          should: [
            { key: "year", range: { lt: 2019 } },
            { key: "draft", match: { value: true } },
          ],
        }),
      },
      (i) => [i.volcano, i.rockets],
    ],
    ["qdrant is_empty", { filter: JSON.stringify({ must: [{ is_empty: { key: "tags" } }] }) }, (i) => [i.rockets]],
    [
      "qdrant text and nested",
      {
        filter: JSON.stringify({
          must: [
            { must_not: [{ key: "name", match: { text: "WHALES" } }] },
            { key: "source", match: { value: "file" } },
          ],
        }),
      },
      (i) => [i.volcano, i.bread, i.rockets],
    ],
    ["opensearch term", { searchengine_filter: JSON.stringify({ term: { topic: "cooking" } }) }, (i) => [i.bread]],
    [
      "opensearch bool must_not (excluding)",
      { searchengine_filter: JSON.stringify({ bool: { must_not: [{ terms: { topic: ["cooking", "animals"] } }] } }) },
      (i) => [i.volcano, i.rockets],
    ],
    [
      "opensearch range and exists",
      {
        searchengine_filter: JSON.stringify({
          bool: { filter: [{ range: { year: { gt: 2018 } } }, { exists: { field: "tags" } }] },
        }),
      },
      (i) => [i.whales, i.bread],
    ],
    [
      "opensearch prefix and should",
      {
        opensearch_filter: JSON.stringify({
          bool: { should: [{ prefix: { name: "whal" } }, { match: { topic: "space" } }] },
        }),
      },
      (i) => [i.whales, i.rockets],
    ],
    [
      "both languages together",
      {
        filter: JSON.stringify({ must: [{ key: "year", range: { gte: 2020 } }] }),
        searchengine_filter: JSON.stringify({ bool: { must_not: { term: { topic: "space" } } } }),
      },
      (i) => [i.whales, i.bread],
    ],
    [
      "document_id",
      { filter: JSON.stringify({ must: [{ key: "document_id", match: { value: "__bread__" } }] }) },
      (i) => [i.bread],
    ],
  ];
  for (const [name, searchMetadata, expected] of cases) {
    it(`applies ${name} inside keyword, vector and hybrid search`, async () => {
      const { key, kb, ids } = await corpusKb();
      const meta = JSON.parse(JSON.stringify(searchMetadata).replace("__bread__", ids.bread)) as Body;
      for (const mode of ["keyword", "vector", "hybrid"]) {
        const q = await query(key, kb, {
          queries: [everything],
          search_metadata: { ...meta, top_k: 10 },
          config: { retrieval_config: { search_mode: mode } },
        });
        expect(q.status, JSON.stringify(q.body)).toBe(200);
        expect(q.items.map((i) => i.document_id).sort(), `${mode}`).toEqual(expected(ids).sort());
      }
    });
  }

  it("a filter that matches nothing returns nothing (it is never dropped)", async () => {
    const { key, kb } = await corpusKb();
    const q = await query(key, kb, {
      queries: [everything],
      search_metadata: { filter: JSON.stringify({ must: [{ key: "topic", match: { value: "nothing-has-this" } }] }) },
    });
    expect(q.status).toBe(200);
    expect(q.items).toEqual([]);
  });
});

describe("knowledge bases: the index Durable Object", () => {
  it("reloads its packed vectors after losing memory and answers the same", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await seedCorpus(key, kb);
    const body = { queries: ["marine mammals"], config: { retrieval_config: { search_mode: "vector" } } };
    const before = await query(key, kb, body);
    await evictDurableObject(kbStub(kb));
    const after = await query(key, kb, body);
    expect(after.items.map((i) => [i.id, Number(i.score).toFixed(6)])).toEqual(
      before.items.map((i) => [i.id, Number(i.score).toFixed(6)]),
    );
  });

  it("keeps keyword scores across an eviction, and never answers from a stale cache after a write", async () => {
    const { key, kb, ids } = await corpusKb();
    const body = {
      queries: ["whales bread rockets"],
      search_metadata: { top_k: 10 },
      config: { retrieval_config: { search_mode: "keyword" } },
    };
    const before = await query(key, kb, body);
    expect(before.items.map((i) => i.document_id)).toContain(ids.whales);
    // Evicted: lengths and posting lists come back from SQLite, with the same scores.
    await evictDurableObject(kbStub(kb));
    const after = await query(key, kb, body);
    expect(after.items.map((i) => [i.id, Number(i.score).toFixed(6)])).toEqual(
      before.items.map((i) => [i.id, Number(i.score).toFixed(6)]),
    );
    // An index stored before its lengths were packed rebuilds them once, to the same scores.
    await runInDurableObject(kbStub(kb), (_instance, state) => {
      state.storage.sql.exec("DELETE FROM length_blocks");
      state.storage.sql.exec("DELETE FROM meta WHERE key = 'lengths'");
    });
    await evictDurableObject(kbStub(kb));
    const rebuilt = await query(key, kb, body);
    expect(rebuilt.items.map((i) => [i.id, Number(i.score).toFixed(6)])).toEqual(
      before.items.map((i) => [i.id, Number(i.score).toFixed(6)]),
    );
    // A deleted document and a new one: the stored caches must not hide either change, even after another eviction.
    expect(
      (await send(`/v1/knowledge-base/${kb}/documents?document_ids=${ids.whales}`, key, { method: "DELETE" })).status,
    ).toBe(200);
    const added = await indexText(
      key,
      kb,
      "more-whales.txt",
      "Humpback whales sing long songs. Whales migrate between feeding and breeding grounds.",
    );
    await evictDurableObject(kbStub(kb));
    const changed = await query(key, kb, body);
    const documents = changed.items.map((i) => i.document_id);
    expect(documents).not.toContain(ids.whales);
    expect(documents[0]).toBe(added);
    // The same scores as an index with no stored cache at all computes from FTS5 alone. (This compared
    // with FTS5's bm25() until the default scoring added query-term weights, b 0.6 and feedback.)
    await runInDurableObject(kbStub(kb), (_instance, state) => {
      state.storage.sql.exec("DELETE FROM postings_cache");
      state.storage.sql.exec("DELETE FROM length_blocks");
      state.storage.sql.exec("DELETE FROM meta WHERE key IN ('lengths', 'stored_postings')");
    });
    await evictDurableObject(kbStub(kb));
    const fresh = await query(key, kb, body);
    expect(changed.items.map((i) => [i.id, Number(i.score).toFixed(6)])).toEqual(
      fresh.items.map((i) => [i.id, Number(i.score).toFixed(6)]),
    );
  });

  it("answers the same after its posting lists are read ahead in slices (the warm pass) and after a reload", async () => {
    const { key, kb } = await corpusKb();
    const bodies = ["whales bread rockets", "marine mammals migrate", "baking sourdough loaves"].map((text) => ({
      queries: [text],
      search_metadata: { top_k: 10 },
    }));
    const scores = async () =>
      Promise.all(
        bodies.map(async (body) => (await query(key, kb, body)).items.map((i) => [i.id, Number(i.score).toFixed(6)])),
      );
    const before = await scores();
    // Nothing cached: the warm pass reads every term from FTS5, a few occurrences per slice, resuming where it stopped.
    const slices = await runInDurableObject(kbStub(kb), (instance, state) => {
      state.storage.sql.exec("DELETE FROM postings_cache");
      state.storage.sql.exec("DELETE FROM meta WHERE key IN ('stored_postings', 'warm_after', 'warm_done')");
      let n = 1;
      while (!instance.warmPostings(5)) n++;
      const terms = state.storage.sql.exec<{ n: number }>("SELECT count(DISTINCT term) AS n FROM items_terms").one().n;
      const stored = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM postings_cache").one().n;
      expect(stored).toBe(terms);
      return n;
    });
    expect(slices).toBeGreaterThan(1);
    await evictDurableObject(kbStub(kb));
    expect(await scores()).toEqual(before);
    // A write starts the pass over (its lists are stale), and the answers follow the write.
    await indexText(key, kb, "more-bread.txt", "Rye bread and sourdough bread rise slowly overnight.");
    const reset = await runInDurableObject(kbStub(kb), (_instance, state) =>
      state.storage.sql.exec("SELECT key FROM meta WHERE key IN ('warm_after', 'warm_done')").toArray(),
    );
    expect(reset).toEqual([]);
  });

  it("scores keywords exactly as FTS5's bm25() ranks them", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 32 });
    const text = Array.from(
      { length: 60 },
      (_, i) =>
        `Turbulent flow ${i % 3 === 0 ? "over heated plates" : "in pipes"} changes pressure ${i % 5 === 0 ? "and heat transfer rates rise sharply" : "slowly"}.`,
    ).join(" ");
    await indexText(key, kb, "flows.txt", text);
    const q = await query(key, kb, {
      queries: ["heated plates heat transfer"],
      search_metadata: { top_k: 20 },
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    const sql = await runInDurableObject(kbStub(kb), (_instance, state) =>
      state.storage.sql
        .exec<{ id: string; score: number }>(
          `SELECT items.id AS id, -bm25(items_fts) AS score FROM items_fts JOIN items ON items.rowid = items_fts.rowid WHERE items_fts MATCH '"heated" OR "plates" OR "heat" OR "transfer"' ORDER BY bm25(items_fts) LIMIT 20`,
        )
        .toArray(),
    );
    expect(q.items.length).toBe(sql.length);
    q.items.forEach((item, i) => expect(Number(item.score)).toBeCloseTo(sql[i].score, 4));
    expect(new Set(q.items.slice(0, 5).map((i) => i.id))).toEqual(new Set(sql.slice(0, 5).map((r) => r.id)));
  });
});
