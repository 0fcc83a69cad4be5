import { env, evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, call, seedOrg } from "../helpers";
import { b64, createKb, fileData, indexText, post, query, send, type Body } from "./kb-fixtures";
import type { KnowledgeBaseIndex } from "../../src/features/knowledge-bases/index/knowledge-base-index";
import { readOriginal } from "../../src/features/knowledge-bases/originals";

const kbStub = (kb: string) =>
  env.KB_INDEX.get(env.KB_INDEX.idFromName(kb)) as unknown as DurableObjectStub<KnowledgeBaseIndex>;
const file = (name: string, text: string, mime = "text/plain") => ({
  file: { type: "file", raw_bytes: b64(text), metadata: { name, mime_type: mime } },
});
const documents = async (key: string, kb: string) =>
  (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];

describe("knowledge bases: many small documents", () => {
  it("indexes a list of files in one request, answering their ids in order (a repeated file keeps one id)", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const texts = [
      "Pelicans dive for sardines.",
      "Walruses haul out on ice floes.",
      "Pelicans dive for sardines.",
      "Otters crack shells on their bellies.",
    ];
    const res = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: texts.map((t, i) => ({ ...file(`animal-${i}.txt`, t), custom_metadata: { n: i } })),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const ids = res.body.document_ids as string[];
    expect(ids).toHaveLength(4);
    // Custom metadata is part of what makes a document the same, so the repeat with n: 2 is its own document.
    expect(new Set(ids).size).toBe(4);
    const docs = await documents(key, kb);
    for (const [i, id] of ids.entries())
      expect(
        docs.find((d) => d._id === id),
        `file ${i}`,
      ).toMatchObject({ name: `animal-${i}.txt`, status: "ready", chunkCount: 1, customMetadata: { n: i } });
    // Small originals are kept beside their chunks (no R2 object each), readable as uploaded.
    const original = await readOriginal(env, kb, { id: ids[1], r2Key: null });
    expect(new TextDecoder().decode(original ?? new Uint8Array())).toBe(texts[1]);
    const q = await query(key, kb, {
      queries: ["walruses ice"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(q.items[0].document_id).toBe(ids[1]);
    const same = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: [file("a.txt", "Identical twins."), file("b.txt", "Identical twins.")],
    });
    const [a, b] = same.body.document_ids as string[];
    expect(b).toBe(a);
  });

  it("takes several multipart file parts named file_data.file as a batch, in order", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const form = new FormData();
    form.append("file_data.file", new File(["Comets grow tails near the sun."], "comet.txt", { type: "text/plain" }));
    form.append(
      "file_data.file",
      new File(["# Nebulae\n\nNebulae are clouds of gas."], "nebula.md", { type: "text/markdown" }),
    );
    form.append("file_data.file", new File(["Quasars outshine galaxies."], "quasar.txt", { type: "text/plain" }));
    const res = await call(`/v1/knowledge-base/${kb}/index`, { method: "POST", headers: bearer(key), body: form });
    const body = (await res.json()) as Body;
    expect(res.status, JSON.stringify(body)).toBe(200);
    const ids = body.document_ids as string[];
    const docs = await documents(key, kb);
    expect(ids.map((id) => docs.find((d) => d._id === id)?.name)).toEqual(["comet.txt", "nebula.md", "quasar.txt"]);
    expect(docs.every((d) => d.status === "ready")).toBe(true);
  });

  it("refuses the whole batch when one file cannot be read, naming it, and stores none of the batch", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const res = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: [
        file("fine.txt", "Readable text."),
        file("broken.json", "{ nope", "application/json"),
        file("also-fine.txt", "More text."),
      ],
    });
    expect(res).toEqual({
      status: 400,
      body: {
        status: "failed",
        error:
          "file_data[1].file ('broken.json') cannot be indexed: the file is not valid JSON; no file of this request was indexed",
      },
    });
    expect(await documents(key, kb)).toEqual([]);
    expect((await env.FILES.list({ prefix: `knowledge-bases/${kb}/` })).objects).toHaveLength(0);
    const tooMany = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: Array.from({ length: 101 }, (_, i) => file(`f${i}.txt`, `text ${i}`)),
    });
    expect(tooMany.status).toBe(400);
    expect(String(tooMany.body.error)).toMatch(/^file_data: /);
    expect(await documents(key, kb)).toEqual([]);
  });

  it("coalesces concurrent requests: every document ready once, nothing counted twice when the requests are sent again", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const texts = Array.from(
      { length: 12 },
      (_, i) => `Station ${i} records rainfall of ${i * 7} millimetres in district ${i}.`,
    );
    const first = await Promise.all(texts.map((t, i) => indexText(key, kb, `station-${i}.txt`, t)));
    const again = await Promise.all(texts.map((t, i) => indexText(key, kb, `station-${i}.txt`, t)));
    expect(again).toEqual(first);
    // A late alarm run finds nothing left to do and changes nothing.
    await runDurableObjectAlarm(kbStub(kb));
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(12);
    expect(docs.every((d) => d.status === "ready" && d.chunkCount === 1)).toBe(true);
    const stats = await kbStub(kb).stats();
    expect(stats).toMatchObject({ chunks: 12, vectors: 12, pending: 0 });
    for (const i of [0, 5, 11]) {
      const q = await query(key, kb, {
        queries: [`station ${i} district ${i}`],
        config: { retrieval_config: { search_mode: "keyword" } },
      });
      expect(q.items[0].document_id).toBe(first[i]);
    }
    const audits = await env.DB.prepare(
      "SELECT count(*) AS n FROM audit_log WHERE org_id = ? AND action = 'knowledge_base.index'",
    )
      .bind(org.orgId)
      .first<{ n: number }>();
    expect(audits?.n).toBe(12);
  });

  it("finishes a batch interrupted after its chunks were queued from the alarm: row written once, chunks counted once", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(key, kb, "first.txt", "Glaciers carve valleys.");
    const docId = "0123456789abcdef01234567";
    const row = {
      id: docId,
      kbId: kb,
      orgId: org.orgId,
      name: "late.txt",
      path: null,
      mimeType: "text/plain",
      source: "file",
      size: 22,
      contentHash: "h",
      r2Key: null,
      customMetadata: {},
      status: "indexing",
      error: null,
      chunkCount: 0,
      createdAt: "2026-01-01T00:00:00.000Z",
      updatedAt: "2026-01-01T00:00:00.000Z",
    };
    const chunk = {
      id: `${docId}-0`,
      documentId: docId,
      position: 0,
      text: "Moraines mark old ice.",
      metadata: { document_id: docId, name: "late.txt" },
    };
    // What ingestDocuments commits before its batch is written; the object then restarts and the batch never runs.
    await runInDurableObject(kbStub(kb), async (_instance, state) => {
      state.storage.sql.exec(
        "INSERT INTO pending (document_id, position, kb_id, model, chunk) VALUES (?, 0, ?, 'loom/static-use-256', ?)",
        docId,
        kb,
        JSON.stringify(chunk),
      );
      state.storage.sql.exec(
        "INSERT INTO finished (document_id, outcome, row) VALUES (?, NULL, ?)",
        docId,
        JSON.stringify(row),
      );
    });
    const during = await query(key, kb, { queries: ["moraines"] });
    expect((during.body.result as Body).indexing).toEqual({ documents: 1, chunks: 1 });
    await runDurableObjectAlarm(kbStub(kb));
    await runDurableObjectAlarm(kbStub(kb));
    const docs = await documents(key, kb);
    expect(docs.find((d) => d._id === docId)).toMatchObject({ status: "ready", chunkCount: 1 });
    expect(await kbStub(kb).stats()).toMatchObject({ chunks: 2, pending: 0 });
    const after = await query(key, kb, {
      queries: ["moraines"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(after.items[0].document_id).toBe(docId);
    expect((after.body.result as Body).indexing).toBeUndefined();
  });
});

describe("knowledge bases: small documents refused in their batch", () => {
  it("refuses a document too large to be sent whole beside one it writes: its row failed with the reason, nothing of it stored, the audit entry written", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const row = (id: string, name: string) => ({
      id,
      kbId: kb,
      orgId: org.orgId,
      name,
      path: null,
      mimeType: "text/plain",
      source: "file",
      size: 10,
      contentHash: `hash-${id}`,
      r2Key: null,
      customMetadata: {},
      status: "indexing" as const,
      error: null,
      chunkCount: 0,
      createdAt: "2026-01-01T00:00:00.000Z",
      updatedAt: "2026-01-01T00:00:00.000Z",
    });
    const chunks = (id: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        id: `${id}-${i}`,
        documentId: id,
        position: i,
        text: `Lichen ${i} grows on bare rock.`,
        metadata: { document_id: id },
      }));
    const big = "0123456789abcdef0123456a";
    const fine = "0123456789abcdef0123456b";
    const audit = {
      sql: "insert into audit_log (id, org_id, actor_id, action, target_type, target_id, details, created_at) values (?, ?, ?, 'knowledge_base.index', 'knowledge_base', ?, '{}', '2026-01-01T00:00:00.000Z')",
      params: ["0123456789abcdef0123456c", org.orgId, org.owner.userId, kb],
    };
    const job = (id: string, n: number) => ({
      kbId: kb,
      documentId: id,
      embeddingModel: "loom/static-use-256",
      chunks: chunks(id, n),
      row: row(id, `${id}.txt`),
      original: new TextEncoder().encode("original"),
    });
    const results = await kbStub(kb).ingestDocuments([job(big, 1001), job(fine, 1)], audit);
    expect(results).toEqual([
      { status: "failed", error: "indexing failed: a document sent whole holds at most 1000 chunks" },
      { status: "ready", chunks: 1 },
    ]);
    const docs = await documents(key, kb);
    expect(docs.find((d) => d._id === big)).toMatchObject({
      status: "failed",
      error: "indexing failed: a document sent whole holds at most 1000 chunks",
    });
    expect(docs.find((d) => d._id === fine)).toMatchObject({ status: "ready", chunkCount: 1 });
    expect(await kbStub(kb).stats()).toMatchObject({ chunks: 1, pending: 0 });
    expect(await readOriginal(env, kb, { id: big, r2Key: null })).toBeNull();
    expect(await readOriginal(env, kb, { id: fine, r2Key: null })).not.toBeNull();
    const audits = await env.DB.prepare("SELECT count(*) AS n FROM audit_log WHERE id = ?")
      .bind("0123456789abcdef0123456c")
      .first<{ n: number }>();
    expect(audits?.n).toBe(1);
  });
});

describe("knowledge bases: small documents after a restart", () => {
  it("writes a batch's rows to D1 again after a restart without doubling the row or its audit entry", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const id = await indexText(key, kb, "fjord.txt", "Fjords are drowned glacial valleys.");
    const countAudits = async () =>
      (
        await env.DB.prepare(
          "SELECT count(*) AS n FROM audit_log WHERE org_id = ? AND action = 'knowledge_base.index' AND details LIKE ?",
        )
          .bind(org.orgId, `%${id}%`)
          .first<{ n: number }>()
      )?.n;
    expect(await countAudits()).toBe(1);
    // The object restarts after D1 has the batch but before its `finished` rows were dropped: they are still there.
    await evictDurableObject(kbStub(kb));
    const left = await runInDurableObject(
      kbStub(kb),
      (_instance, state) =>
        state.storage.sql
          .exec<{ n: number }>("SELECT count(*) AS n FROM finished f JOIN pending_audits a USING (document_id)")
          .one().n,
    );
    expect(left).toBe(1);
    await runDurableObjectAlarm(kbStub(kb));
    expect(await countAudits()).toBe(1);
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ _id: id, status: "ready", chunkCount: 1 });
    const after = await runInDurableObject(
      kbStub(kb),
      (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM finished").one().n,
    );
    expect(after).toBe(0);
  });
});

describe("knowledge bases: progress while indexing", () => {
  it("shows chunks indexed and in all for a document still indexing, counts documents by state, and says what a query could not search", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    await indexText(key, kb, "small.txt", "Lighthouses guide ships past the reef.");
    const sentences = Array.from(
      { length: 1200 },
      (_, i) => `Sentence number ${i} talks about topic ${i % 7} in plain words.`,
    ).join(" ");
    const res = await post(`/v1/knowledge-base/${kb}/index`, key, fileData("big.txt", "text/plain", sentences));
    const bigId = (res.body.document_ids as string[])[0];
    const big = (await documents(key, kb)).find((d) => d._id === bigId);
    expect(big, JSON.stringify(big)).toMatchObject({
      status: "indexing",
      progress: { chunksIndexed: 1000, chunksTotal: 1200 },
    });
    const record = await send(`/v1/knowledge-base?id=${kb}`, key);
    expect((record.body.object as Body).documentsByState).toEqual({ indexing: 1, ready: 1, failed: 0 });
    const during = await query(key, kb, { queries: ["lighthouses"] });
    expect(during.status).toBe(200);
    expect(during.items[0].text).toContain("Lighthouses");
    expect((during.body.result as Body).indexing).toEqual({ documents: 1, chunks: 200 });
    while (await runDurableObjectAlarm(kbStub(kb))) {
      /* each alarm run is one step */
    }
    const done = (await documents(key, kb)).find((d) => d._id === bigId);
    expect(done).toMatchObject({ status: "ready", chunkCount: 1200 });
    expect(done).not.toHaveProperty("progress");
    expect(((await send(`/v1/knowledge-base?id=${kb}`, key)).body.object as Body).documentsByState).toEqual({
      indexing: 0,
      ready: 2,
      failed: 0,
    });
    expect(((await query(key, kb, { queries: ["lighthouses"] })).body.result as Body).indexing).toBeUndefined();
  });
});
