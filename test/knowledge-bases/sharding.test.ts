import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, fileData, post, query, send, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardMap, shardStub, splitUntilSettled } from "./shard-fixtures";
import type { ShardMap } from "../../src/features/knowledge-bases/index/shard-map";
import { readOriginal } from "../../src/features/knowledge-bases/originals";
import type { StageOf } from "../../src/features/knowledge-bases/index/shard-stages";

/** Documents sharing one word ("report"), so a keyword query for it answers every chunk. */
function reports(n: number, offset = 0): { name: string; text: string; meta: Body }[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `report-${i + offset}.txt`,
    text: `Report ${i + offset}\n\nThis report covers topic ${(i + offset) % 7} and item${i + offset} in plain words.`,
    meta: { n: i + offset },
  }));
}

const everything = {
  queries: ["report"],
  search_metadata: { top_k: 100 },
  config: { retrieval_config: { search_mode: "keyword" } },
};

/** Chunks per document in each shard's own SQLite. */
async function chunksByShard(kbId: string, map: ShardMap): Promise<Map<number, Map<string, number>>> {
  const out = new Map<number, Map<string, number>>();
  for (const s of map.shards) {
    const rows = await runInDurableObject(shardStub(kbId, s.index), (_instance, state) =>
      state.storage.sql
        .exec<{ document_id: string; n: number }>("SELECT document_id, count(*) AS n FROM items GROUP BY document_id")
        .toArray(),
    );
    out.set(s.index, new Map(rows.map((r) => [r.document_id, r.n])));
  }
  return out;
}

function ranked(items: Body[]): [number, unknown][] {
  return items.map((i) => [Number((i.metadata as Body).n), i.score]);
}

describe("sharded knowledge bases", () => {
  it("keeps each document's chunks in one shard and deletes it there", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const ids = await indexBatches(key, kb, reports(40));
    const record = async () => (await send(`/v1/knowledge-base?id=${kb}`, key)).body.object as Body;
    expect((await record()).shards).toBe(1);
    await forceSmallShards(kb, 12, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(3);
    expect((await record()).shards).toBe(map.shards.length);
    const before = await chunksByShard(kb, map);
    for (const id of ids)
      expect(
        [...before.values()].filter((docs) => docs.has(id)),
        id,
      ).toHaveLength(1);

    const victim = ids[17];
    const home = [...before].find(([, docs]) => docs.has(victim))?.[0];
    const res = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${victim}`, key, { method: "DELETE" });
    expect(res.status).toBe(200);
    const after = await chunksByShard(kb, map);
    for (const [index, docs] of after) {
      const expected = new Map(before.get(index));
      if (index === home) expected.delete(victim);
      expect(docs, `shard ${index}`).toEqual(expected);
    }
    const q = await query(key, kb, everything);
    expect(q.items.map((i) => (i.metadata as Body).n).sort((a, b) => Number(a) - Number(b))).toEqual(
      Array.from({ length: 40 }, (_, i) => i).filter((i) => i !== 17),
    );
  });

  it("moves each small original with its document when a shard splits, and deletes it with its document", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const docs = reports(30);
    const ids = await indexBatches(key, kb, docs);
    await forceSmallShards(kb, 10, 4);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(3);
    const held = await chunksByShard(kb, map);
    const originalsByShard = new Map<number, string[]>();
    for (const s of map.shards)
      originalsByShard.set(
        s.index,
        await runInDurableObject(shardStub(kb, s.index), (_instance, state) =>
          state.storage.sql
            .exec<{ document_id: string }>("SELECT document_id FROM originals ORDER BY document_id")
            .toArray()
            .map((r) => r.document_id),
        ),
      );
    for (const [index, docsHere] of held)
      expect(originalsByShard.get(index), `shard ${index}`).toEqual([...docsHere.keys()].sort());
    for (const [i, id] of ids.entries()) {
      const bytes = await readOriginal(env, kb, { id, r2Key: null });
      expect(new TextDecoder().decode(bytes ?? new Uint8Array()), id).toBe(docs[i].text);
    }
    const moved = ids.find((id) => !held.get(0)?.has(id)) ?? "";
    expect(moved).not.toBe("");
    const res = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${moved}`, key, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await readOriginal(env, kb, { id: moved, r2Key: null })).toBeNull();
  });

  it("answers every query in full while a shard splits, writes included, and never counts a chunk twice", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const single = await createKb(key);
    await indexBatches(key, kb, reports(30));
    await indexBatches(key, single, reports(30));
    await forceSmallShards(kb, 20, 3);

    // The split runs one step at a time; between steps, a query and (once) a write to each side.
    let steps = 0;
    let added = false;
    let deleted = false;
    const stub = shardStub(kb, 0);
    for (;;) {
      const progress = await stub.splitStep();
      const [a, b] = await Promise.all([query(key, single, everything), query(key, kb, everything)]);
      expect(b.body.result).not.toHaveProperty("partial");
      // Global statistics: the same chunks with the same scores as the unsharded twin, at every step.
      expect(ranked(b.items), `after step ${steps}`).toEqual(ranked(a.items));
      // The writes land while the split is still copying (the map still has one shard).
      if ((steps === 3 || steps === 5) && !(steps === 3 ? added : deleted))
        expect((await shardMap(kb)).shards).toHaveLength(1);
      if (steps === 3 && !added) {
        await indexBatches(key, kb, reports(4, 100));
        await indexBatches(key, single, reports(4, 100));
        added = true;
      }
      if (steps === 5 && !deleted) {
        const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
        const twin = (await send(`/v1/knowledge-base/${single}/documents`, key)).body.documents as Body[];
        const pick = (list: Body[]) => list.filter((d) => ["report-2.txt", "report-101.txt"].includes(String(d.name)));
        for (const [base, list] of [
          [kb, pick(docs)],
          [single, pick(twin)],
        ] as const)
          expect(
            (
              await send(`/v1/knowledge-base/${base}/documents?document_ids=${list.map((d) => d._id).join(",")}`, key, {
                method: "DELETE",
              })
            ).status,
          ).toBe(200);
        deleted = true;
      }
      steps++;
      if (progress === "idle") break;
      expect(steps).toBeLessThan(200);
    }
    expect(added && deleted).toBe(true);
    const map = await shardMap(kb);
    expect(map.shards.length).toBe(2);
    const held = await chunksByShard(kb, map);
    const all = [...held.values()].flatMap((docs) => [...docs.keys()]);
    expect(new Set(all).size).toBe(all.length);
    expect(all).toHaveLength(32);
    const final = await query(key, kb, everything);
    expect(final.items).toHaveLength(32);
  });

  it("splits from the shard's alarm once past its threshold, with no caller driving it", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexBatches(key, kb, reports(24));
    // Not manual: configuring schedules the alarm, and each alarm run is one step of the split.
    await shardStub(kb, 0).configureSharding({ splitChunks: 16, batchChunks: 4 });
    let map = await shardMap(kb);
    for (let i = 0; i < 500 && map.shards.length === 1; i++) {
      await runDurableObjectAlarm(shardStub(kb, 0));
      map = await shardMap(kb);
    }
    expect(map.shards.length).toBeGreaterThan(1);
    const q = await query(key, kb, everything);
    expect(q.items).toHaveLength(24);
    const held = await chunksByShard(kb, map);
    expect([...held.values()].reduce((a, docs) => a + docs.size, 0)).toBe(24);
  });

  it("splits while a large document is still indexing from the alarm, instead of waiting for it", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    await indexBatches(key, kb, reports(24));
    const sentences = Array.from({ length: 2500 }, (_, i) => `Sentence ${i} on topic ${i % 5} in plain words.`);
    const big = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("big.txt", "text/plain", sentences.join(" ")),
    );
    expect(big.status).toBe(200);
    await shardStub(kb, 0).configureSharding({ splitChunks: 16, batchChunks: 4 });
    const state = () =>
      runInDurableObject(shardStub(kb, 0), (_instance, st) => ({
        pending: st.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n,
        splitting: st.storage.sql.exec("SELECT 1 FROM shard_state WHERE key = 'split'").toArray().length > 0,
      }));
    expect(await state()).toEqual({ pending: expect.any(Number), splitting: false });
    expect((await state()).pending).toBeGreaterThan(0);
    await runDurableObjectAlarm(shardStub(kb, 0));
    // The first alarm began the split though the large document still has steps to go.
    const after = await state();
    expect(after.splitting).toBe(true);
    expect(after.pending).toBeGreaterThan(0);
    let map = await shardMap(kb);
    for (let i = 0; i < 1000 && (map.shards.length === 1 || (await state()).pending > 0); i++) {
      await runDurableObjectAlarm(shardStub(kb, 0));
      map = await shardMap(kb);
    }
    expect(map.shards.length).toBeGreaterThan(1);
    // Every report is still found once the split and the large document are done.
    const q = await query(key, kb, everything);
    const found = new Set(q.items.map((i) => Number((i.metadata as Body).n)).filter(Number.isFinite));
    expect([...found].sort((x, y) => x - y)).toEqual(Array.from({ length: 24 }, (_, i) => i));
  });

  it("tells a caller holding the map from before a split that it is stale, so it starts over", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexBatches(key, kb, reports(20));
    const before = await shardMap(kb);
    await forceSmallShards(kb, 12, 5);
    const after = await splitUntilSettled(kb);
    expect(after.version).toBeGreaterThan(before.version);
    const stats: StageOf<"stats"> = { kind: "stats", words: ["report"], frequencies: false, stems: [] };
    // Shard 0 gave half its range away: asked for the whole range it says so instead of answering for less.
    const old = before.shards[0];
    expect(await shardStub(kb, 0).stage({ lo: old.lo, hi: old.hi }, stats)).toEqual({ stale: true });
    const now = after.shards[0];
    expect(await shardStub(kb, 0).stage({ lo: now.lo, hi: now.hi }, stats)).toMatchObject({ stale: false });
    const q = await query(key, kb, everything);
    expect(q.items).toHaveLength(20);
  });

  it("answers partial: true naming a shard that fails, with what the other shards found", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexBatches(key, kb, reports(20));
    await forceSmallShards(kb, 12, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(2);
    const held = await chunksByShard(kb, map);
    const others = new Set([...held].flatMap(([index, docs]) => (index === 1 ? [] : [...docs.keys()])));
    // A real failure inside shard 1: its tables are gone, so every step it is asked fails.
    await runInDurableObject(shardStub(kb, 1), (_instance, state) => {
      state.storage.sql.exec("DROP TABLE items_fts");
      state.storage.sql.exec("DROP TABLE items");
    });
    for (const mode of ["keyword", "vector", "hybrid"]) {
      const q = await query(key, kb, { ...everything, config: { retrieval_config: { search_mode: mode } } });
      expect(q.status).toBe(200);
      expect(q.body.result, mode).toMatchObject({ partial: true, missing_shards: [{ shard: 1, reason: "failed" }] });
      const docs = new Set(q.items.map((i) => i.document_id));
      expect([...docs].sort(), mode).toEqual([...others].sort());
    }
  });
});
