import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, send, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardStub, splitUntilSettled } from "./shard-fixtures";
import { indexStub } from "../../src/features/knowledge-bases/durable-object-vector-index";
import { shardOf, type ShardMap } from "../../src/features/knowledge-bases/index/shard-map";

/**
 * Reads other than the query's own steps, over a sharded base with one shard broken: each answers
 * what the other shards hold and names the broken one, instead of failing whole or dropping it
 * without a word.
 */

function reports(n: number): { name: string; text: string; meta: Body }[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `report-${i}.txt`,
    text: `Report ${i}\n\nThis report covers topic ${i % 7} and item${i} in plain words.`,
    meta: { n: i },
  }));
}

/** A base of 24 documents split into 2+ shards, then shard 1 broken for real: its tables are gone. */
async function brokenShardBase() {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  const kb = await createKb(key);
  const ids = await indexBatches(key, kb, reports(24));
  await forceSmallShards(kb, 12, 5);
  const map: ShardMap = await splitUntilSettled(kb);
  expect(map.shards.length).toBeGreaterThanOrEqual(2);
  await runInDurableObject(shardStub(kb, 1), (_instance, state) => {
    state.storage.sql.exec("DROP TABLE items_fts");
    state.storage.sql.exec("DROP TABLE items");
  });
  const onBroken = ids.filter((id) => shardOf(map, id).index === 1);
  const elsewhere = ids.filter((id) => shardOf(map, id).index !== 1);
  expect(onBroken.length).toBeGreaterThan(0);
  return { key, kb, ids, onBroken, elsewhere };
}

const brokenShard = [{ shard: 1, reason: "failed" }];

describe("sharded reads with a failing shard", () => {
  it("keywordSearch names the failing shard and answers the others' hits", async () => {
    const { kb, elsewhere } = await brokenShardBase();
    const found = await indexStub(env, kb).keywordSearch("report", { topK: 50 });
    expect(found.missing).toEqual(brokenShard);
    const chunks = await indexStub(env, kb).getChunks(found.hits.map((h) => h.id));
    expect(new Set(chunks.chunks.map((c) => c.documentId))).toEqual(new Set(elsewhere));
  });

  it("getChunks and documentChunks answer what the other shards hold and name the failing one", async () => {
    const { kb, ids, elsewhere } = await brokenShardBase();
    const index = indexStub(env, kb);
    const byDocument = await index.documentChunks(ids, 40);
    expect(byDocument.missing).toEqual(brokenShard);
    expect(new Set(byDocument.chunks.map((c) => c.documentId))).toEqual(new Set(elsewhere));
    const byId = await index.getChunks(byDocument.chunks.map((c) => c.id));
    expect(byId.missing).toEqual(brokenShard);
    expect(byId.chunks.map((c) => c.id).sort()).toEqual(byDocument.chunks.map((c) => c.id).sort());
  });

  it("a query with expand_query answers 200, partial, naming the shard its feedback could not read", async () => {
    const { key, kb, elsewhere } = await brokenShardBase();
    const q = await query(key, kb, {
      queries: ["report topic"],
      search_metadata: { top_k: 100 },
      config: { expand_query: true },
    });
    expect(q.status).toBe(200);
    expect(q.body.result).toMatchObject({ partial: true, missing_shards: brokenShard });
    expect(new Set(q.items.map((i) => i.document_id))).toEqual(new Set(elsewhere));
  });

  it("the documents list answers 200 with the other shards' progress and names the failing shard", async () => {
    const { key, kb, onBroken, elsewhere } = await brokenShardBase();
    // Documents still indexing, one on the broken shard and one elsewhere: their progress is read from the shards.
    const indexing = [onBroken[0], elsewhere[0]];
    for (const id of indexing)
      await env.DB.prepare("UPDATE kb_documents SET status = 'indexing' WHERE id = ?").bind(id).run();
    const res = await send(`/v1/knowledge-base/${kb}/documents`, key);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ partial: true, missing_shards: brokenShard });
    const docs = new Map((res.body.documents as Body[]).map((d) => [d._id, d]));
    expect(docs.size).toBe(24);
    // No made-up count for the document the broken shard holds; the real one for the other.
    expect(docs.get(onBroken[0])).not.toHaveProperty("progress");
    expect(docs.get(elsewhere[0])).toMatchObject({
      status: "indexing",
      progress: { chunksIndexed: 1, chunksTotal: 1 },
    });
  });
});
