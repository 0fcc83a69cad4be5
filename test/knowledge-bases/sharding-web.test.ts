import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardStub, splitUntilSettled } from "./shard-fixtures";
import { documents, freshSite, html, indexUrl, makeRescrapesDue, publish, runAlarms, sdkUrlBody } from "./web-fixtures";
import { shardOf } from "../../src/features/knowledge-bases/index/shard-map";

/** Chunks each shard holds of a document. */
async function heldBy(kb: string, shards: number[], documentId: string): Promise<number[]> {
  const out: number[] = [];
  for (const index of shards) {
    const n = await runInDurableObject(
      shardStub(kb, index),
      (_instance, state) =>
        state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items WHERE document_id = ?", documentId).one()
          .n,
    );
    if (n > 0) out.push(index);
  }
  return out;
}

/** A knowledge base of 24 one-chunk files, enough to split into shards of 12. */
async function baseWithFillers(): Promise<{ key: string; kb: string }> {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  const kb = await createKb(key);
  await indexBatches(
    key,
    kb,
    Array.from({ length: 24 }, (_, i) => ({ name: `filler-${i}.txt`, text: `Filler ${i}\n\nPlain words ${i}.` })),
  );
  return { key, kb };
}

describe("web sources on a sharded knowledge base", () => {
  it("places each page's document by its id like a file's, and a re-scrape leaves no old copy on any shard", async () => {
    const { key, kb } = await baseWithFillers();
    const url = `https://${freshSite()}/news`;
    await publish(url, html("News", "<p>The harbour opens on day zero.</p>"));
    const res = await indexUrl(key, kb, sdkUrlBody(url, { recursive: false, rescrape_frequency: "Daily" }));
    expect(res.status).toBe(200);
    let pageId = (res.body.document_ids as string[])[0];
    await forceSmallShards(kb, 12, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(2);
    const all = map.shards.map((s) => s.index);
    expect(await heldBy(kb, all, pageId)).toEqual([shardOf(map, pageId).index]);

    // Each changed page becomes a new document (a new id, so a shard of its own by hash): re-scrape
    // until one moved between shards, checking every time that only the newest text is found.
    let moved = 0;
    for (let day = 1; day <= 12 && moved < 2; day++) {
      await publish(url, html("News", `<p>The harbour opens on day ${day}.</p>`));
      await makeRescrapesDue(kb);
      await runAlarms(kb);
      const page = (await documents(key, kb)).find((d) => d.path === url);
      const newId = String(page?._id);
      expect(newId).not.toBe(pageId);
      if (shardOf(map, newId).index !== shardOf(map, pageId).index) moved++;
      expect(await heldBy(kb, all, pageId), `day ${day}: the replaced page`).toEqual([]);
      expect(await heldBy(kb, all, newId), `day ${day}: the new page`).toEqual([shardOf(map, newId).index]);
      const q = await query(key, kb, { queries: ["harbour opens"], search_metadata: { top_k: 5 } });
      const texts = q.items.map((i) => String(i.text)).filter((t) => t.includes("harbour"));
      expect(texts, `day ${day}`).toEqual([expect.stringContaining(`day ${day}.`)]);
      pageId = newId;
    }
    // Two moves in twelve re-scrapes: a chance of about 1 in 400 that fewer happen by luck with two shards.
    expect(moved).toBeGreaterThanOrEqual(1);
  });
  it("holds a page written through shard 0 to KB_MAX_CHUNKS counted over every shard, storing nothing when refused", async () => {
    const { kb } = await baseWithFillers();
    await forceSmallShards(kb, 12, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(2);
    // A page's document that another shard owns: shard 0 (which crawls) forwards its write there,
    // as it does for every page, without the Worker's count of the other shards.
    let documentId = "";
    for (let i = 0; shardOf(map, documentId).index === 0; i++) documentId = `page-${i}`;
    const owner = shardOf(map, documentId).index;
    const before = await Promise.all(
      map.shards.map(async (s) => ({ index: s.index, ...(await shardStub(kb, s.index).stats()) })),
    );
    const held = before.reduce((a, s) => a + s.chunks + s.pending, 0);
    const onOwner = before.find((s) => s.index === owner)?.chunks ?? 0;
    expect(onOwner).toBeLessThan(held);
    const limit = env.KB_VECTOR_BACKEND === "vectorize" ? 1_000_000 : 10_000_000;
    // Fits beside the owner's chunks alone, not beside the whole base's.
    const total = limit - onOwner;
    const chunk = { id: `${documentId}-0`, documentId, position: 0, text: "One page too many.", metadata: {} };
    const result = await shardStub(kb, 0).ingest(
      { kbId: kb, documentId, embeddingModel: "loom/static-use-256", chunks: [chunk] },
      { reset: true, start: true, total },
    );
    expect(result).toEqual({
      status: "failed",
      error: `the knowledge base holds ${held} chunks and this document gives ${total}; the limit is ${limit} chunks per knowledge base (KB_MAX_CHUNKS)`,
    });
    const after = await Promise.all(
      map.shards.map(async (s) => ({ index: s.index, ...(await shardStub(kb, s.index).stats()) })),
    );
    expect(after).toEqual(before);
  });
});
