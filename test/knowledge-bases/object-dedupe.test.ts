import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { b64, createKb, fileData, post, send, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardStub, splitUntilSettled } from "./shard-fixtures";
import type { DocumentJob } from "../../src/features/knowledge-bases/index/knowledge-base-index";
import { checkHashes, settleAnswer } from "../../src/features/knowledge-bases/index/hash-check";
import { STEP_CHUNKS } from "../../src/features/knowledge-bases/index/index-limits";

// De-duplication answered by the index object (content-hashes.ts, checked-ingestion.ts, issue 14):
// the index route no longer asks D1 for identical documents while the base's shard 0 can vouch
// for its content hashes; these pin that its answers stay what D1's were.

const index = async (key: string, kb: string, name: string, text: string) => {
  const res = await post(`/v1/knowledge-base/${kb}/index`, key, fileData(name, "text/plain", text));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.document_ids as string[])[0];
};
const documents = async (key: string, kb: string) =>
  (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
const hashState = (kb: string) =>
  runInDurableObject(shardStub(kb, 0), (_instance, state) => ({
    complete: state.storage.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'content_hashes'").one()
      .value,
    held: state.storage.sql
      .exec<{ document_id: string }>("SELECT document_id FROM content_hashes ORDER BY document_id")
      .toArray()
      .map((r) => r.document_id),
  }));

function job(kb: string, orgId: string, id: string, hash: string, chunks: number): DocumentJob {
  return {
    kbId: kb,
    documentId: id,
    embeddingModel: "loom/static-use-256",
    chunks: Array.from({ length: chunks }, (_, i) => ({
      id: `${id}-${i}`,
      documentId: id,
      position: i,
      text: `Moss ${i} covers the north side.`,
      metadata: { document_id: id },
    })),
    row: {
      id,
      kbId: kb,
      orgId,
      name: `${id}.txt`,
      path: null,
      mimeType: "text/plain",
      source: "file",
      size: 10,
      contentHash: hash,
      r2Key: null,
      customMetadata: {},
      status: "indexing",
      error: null,
      chunkCount: 0,
      createdAt: "2026-01-01T00:00:00.000Z",
      updatedAt: "2026-01-01T00:00:00.000Z",
    },
  };
}

describe("knowledge bases: identical documents answered by the index object", () => {
  it("answers an identical file's id from the object, and a new document once that one is deleted", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const first = await index(key, kb, "a.txt", "Herons stand still in shallow water.");
    expect(await index(key, kb, "b.txt", "Herons stand still in shallow water.")).toBe(first);
    expect(await hashState(kb)).toEqual({ complete: "complete", held: [first] });
    expect((await documents(key, kb)).map((d) => d._id)).toEqual([first]);

    const deleted = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${first}`, key, { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect((await hashState(kb)).held).toEqual([]);
    const again = await index(key, kb, "c.txt", "Herons stand still in shallow water.");
    expect(again).not.toBe(first);
    expect(await documents(key, kb)).toEqual([expect.objectContaining({ _id: again, status: "ready" })]);
  });

  it("gives concurrent identical files one document, every request answered its id", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const ids = await Promise.all(
      Array.from({ length: 6 }, (_, i) => index(key, kb, `copy-${i}.txt`, "Swifts sleep on the wing.")),
    );
    expect(new Set(ids).size).toBe(1);
    expect((await documents(key, kb)).map((d) => d._id)).toEqual([ids[0]]);
    // Within one request as well, beside a new file: the request is sent back, then written without the known one.
    const res = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: [
        { file: { type: "file", raw_bytes: b64("Terns migrate pole to pole."), metadata: { name: "t.txt" } } },
        { file: { type: "file", raw_bytes: b64("Swifts sleep on the wing."), metadata: { name: "s.txt" } } },
      ],
    });
    const [tern, swift] = res.body.document_ids as string[];
    expect(swift).toBe(ids[0]);
    const docs = await documents(key, kb);
    expect(docs.map((d) => d._id).sort()).toEqual([ids[0], tern].sort());
    const audits = await env.DB.prepare(
      "SELECT details FROM audit_log WHERE target_id = ? AND action = 'knowledge_base.index'",
    )
      .bind(kb)
      .all<{ details: string }>();
    // One entry per request that wrote something, naming only what it wrote.
    expect(audits.results.map((a) => JSON.parse(a.details).document_id)).toEqual([ids[0], tern]);
  });

  it("never answers a failed document as the identical one: the same content is indexed anew", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const stub = shardStub(kb, 0);
    const [failed] = await stub.ingestDocuments([job(kb, org.orgId, "doc-failed", "hash-moss", STEP_CHUNKS + 1)]);
    expect(failed.status).toBe("failed");
    const answer = await stub.ingestDocumentsOrMap([job(kb, org.orgId, "doc-fresh", "hash-moss", 2)], undefined, true);
    expect(answer).toEqual({ results: [{ status: "ready", chunks: 2 }] });
    const again = await stub.ingestDocumentsOrMap([job(kb, org.orgId, "doc-third", "hash-moss", 2)], undefined, true);
    expect(again).toEqual({ results: [{ status: "known", documentId: "doc-fresh" }] });
    expect((await hashState(kb)).held).toEqual(["doc-fresh"]);
  });

  it("leaves de-duplication to D1 once a document was indexed in steps, and still answers identical content", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    const small = await index(key, kb, "small.txt", "Gannets plunge from great heights.");
    const sentences = Array.from(
      { length: 1200 },
      (_, i) => `Sentence number ${i} talks about topic ${i % 7} in plain words.`,
    ).join(" ");
    const big = await index(key, kb, "big.txt", sentences);
    expect((await documents(key, kb)).find((d) => d._id === big)?.status).toBe("indexing");
    expect((await hashState(kb)).complete).toBe("incomplete");
    expect(await index(key, kb, "big-again.txt", sentences)).toBe(big);
    expect(await index(key, kb, "small-again.txt", "Gannets plunge from great heights.")).toBe(small);
    const fresh = await index(key, kb, "new.txt", "Puffins nest in burrows.");
    expect(await index(key, kb, "new-again.txt", "Puffins nest in burrows.")).toBe(fresh);
    expect((await documents(key, kb)).length).toBe(3);
  });

  it("after a split, identical content still answers the document it is, on whichever shard it lives", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const texts = Array.from({ length: 30 }, (_, i) => ({
      name: `note-${i}.txt`,
      text: `Note ${i}: the lighthouse keeper logged storm ${i}.`,
    }));
    const ids = await indexBatches(key, kb, texts);
    await forceSmallShards(kb, 10, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThan(1);
    for (const i of [0, 13, 29]) expect(await index(key, kb, `again-${i}.txt`, texts[i].text)).toBe(ids[i]);
    const fresh = await index(key, kb, "fresh.txt", "The lighthouse lamp was replaced.");
    expect(await index(key, kb, "fresh-again.txt", "The lighthouse lamp was replaced.")).toBe(fresh);
    expect((await documents(key, kb)).length).toBe(31);
  });
});

describe("the object's de-duplication check within one batch", () => {
  const entry = (call: object, id: string, hash: string, check = true) => ({
    job: job("kb", "org", id, hash, 1),
    call,
    check,
  });
  const held = (known: Record<string, string>, complete = true) => ({
    complete: () => complete,
    documentWith: (hash: string) => known[hash],
  });

  it("sends back a whole call with a held or earlier-in-batch hash, and only checking calls", () => {
    const [a, b, c, d] = [{}, {}, {}, {}];
    const entries = [
      entry(a, "a1", "h1"),
      entry(b, "b1", "h2"),
      entry(b, "b2", "h1"), // taken by a1, earlier in the batch
      entry(c, "c1", "h-held"),
      entry(d, "d1", "h2", false), // its caller asked D1 already
    ];
    const { answers, fromBatch } = checkHashes(entries, held({ "h-held": "old" }));
    expect(answers).toEqual([
      undefined,
      { status: "retry" },
      { status: "known", documentId: "a1" },
      { status: "known", documentId: "old" },
      undefined,
    ]);
    expect([...fromBatch]).toEqual([[2, "a1"]]);
    // A pointer into the batch holds only if that document ends ready.
    const ready = new Map([["a1", { status: "ready" as const, chunks: 1 }]]);
    const failed = new Map([["a1", { status: "failed" as const, error: "x" }]]);
    expect(settleAnswer(answers[2] ?? { status: "retry" }, "a1", ready)).toEqual({ status: "known", documentId: "a1" });
    expect(settleAnswer(answers[2] ?? { status: "retry" }, "a1", failed)).toEqual({ status: "retry" });
  });

  it("answers unchecked while the object cannot vouch for its hashes", () => {
    const call = {};
    const { answers } = checkHashes([entry(call, "x", "h")], held({}, false));
    expect(answers).toEqual([{ status: "unchecked" }]);
  });
});
