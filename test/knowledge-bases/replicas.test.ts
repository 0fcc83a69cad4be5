import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, callWith, json, seedOrg } from "../helpers";
import { createKb, indexText, query, send, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, splitUntilSettled, shardStub } from "./shard-fixtures";
import { replicaName } from "../../src/features/knowledge-bases/index/replicas";
import { shardName } from "../../src/features/knowledge-bases/index/shard-map";

const REPLICAS = 2;

function replica(kbId: string, r: number, shard = 0) {
  return shardStub(replicaName(shardName(kbId, shard), r), 0);
}

/** A query through the Worker configured with read replicas. */
async function replicaQuery(apiKey: string, kbId: string, body: Body): Promise<Body[]> {
  const res = await callWith({ KB_READ_REPLICAS: String(REPLICAS) }, `/v1/knowledge-base/${kbId}/query`, {
    ...json(body),
    headers: { ...bearer(apiKey), "content-type": "application/json" },
  });
  expect(res.status).toBe(200);
  const result = ((await res.json()) as Body).result as Body;
  return result.chunks as Body[];
}

const ask = { queries: ["whale ocean bread"], search_metadata: { top_k: 10 } };

async function served(kbId: string): Promise<number[]> {
  return Promise.all(
    Array.from({ length: REPLICAS }, (_, i) =>
      replica(kbId, i + 1)
        .replicaStats()
        .then((s) => s.served),
    ),
  );
}

async function syncAll(kbId: string): Promise<void> {
  for (let r = 1; r <= REPLICAS; r++) await replica(kbId, r).replicaSync(kbId, replicaName(kbId, r));
}

describe("read replicas", () => {
  it("answer exactly as the primary, follow writes, are skipped when broken, and go with the knowledge base", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(key, kb, "whales.txt", "Whales are marine mammals of the ocean. The blue whale is huge.");
    const bread = await indexText(
      key,
      kb,
      "bread.txt",
      "Sourdough bread rises with wild yeast; bread and whale stories.",
    );
    await indexText(key, kb, "ocean.txt", "The ocean covers most of the planet. Whales swim in every ocean.");

    // Never synced: the replicas answer `behind` and the primary answers.
    const primary = (await query(key, kb, ask)).items;
    expect(primary.length).toBeGreaterThan(0);
    expect(await replicaQuery(key, kb, ask)).toEqual(primary);

    await syncAll(kb);
    const before = await served(kb);
    for (let i = 0; i < 6; i++) expect(await replicaQuery(key, kb, ask)).toEqual(primary);
    const after = await served(kb);
    // Reads really spread: every replica answered some of them.
    after.forEach((n, i) => expect(n).toBeGreaterThan(before[i]));

    // Replica 2 drops out of the primary's list, so the next writes leave it behind with old data.
    await runInDurableObject(shardStub(kb, 0), (_instance, state) => {
      state.storage.sql.exec("DELETE FROM replica_members WHERE name = ?", replicaName(kb, 2));
    });
    const behindBefore = (await replica(kb, 2).replicaStats()).behind;
    // A write and a delete: the primary pushes them to its (listed) replicas before answering.
    await indexText(key, kb, "more.txt", "Bread, whales and the ocean again: a new ocean whale bread note.");
    const del = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${bread}`, key, { method: "DELETE" });
    expect(del.status).toBe(200);
    const fresh = (await query(key, kb, ask)).items;
    expect(fresh).not.toEqual(primary);
    expect(fresh.some((c) => c.document_id === bread)).toBe(false);
    const mid = await served(kb);
    for (let i = 0; i < 6; i++) expect(await replicaQuery(key, kb, ask)).toEqual(fresh);
    const later = await served(kb);
    expect(later[0]).toBeGreaterThan(mid[0]);
    // The replica left behind refused reads while behind (the primary answered them; every answer
    // above is the new state), catching up in the background; caught up, it answers again.
    expect((await replica(kb, 2).replicaStats()).behind).toBeGreaterThan(behindBefore);
    await syncAll(kb);
    for (let i = 0; i < 6; i++) expect(await replicaQuery(key, kb, ask)).toEqual(fresh);
    expect((await served(kb))[1]).toBeGreaterThan(later[1]);

    // A broken replica is not used: the answer stays the primary's.
    await runInDurableObject(replica(kb, 1), (_instance, state) => {
      state.storage.sql.exec("DROP TABLE items");
    });
    for (let i = 0; i < 6; i++) expect(await replicaQuery(key, kb, ask)).toEqual(fresh);

    // Deleting the knowledge base empties its replicas.
    const gone = await send(`/v1/knowledge-base/${kb}`, key, { method: "DELETE" });
    expect(gone.status).toBeLessThan(300);
    const left = await runInDurableObject(
      replica(kb, 2),
      (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n,
    );
    expect(left).toBe(0);
  });

  it("serve the steps of a sharded query with the primaries' exact answer", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const docs = Array.from({ length: 30 }, (_, i) => ({
      name: `note-${i}.txt`,
      text: `Note ${i}\n\nThis note covers topic ${i % 5}, the ocean and item${i} in plain words.`,
      meta: { n: i },
    }));
    await indexBatches(key, kb, docs);
    await forceSmallShards(kb, 10, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(2);
    for (const s of map.shards)
      for (let r = 1; r <= REPLICAS; r++)
        await replica(kb, r, s.index).replicaSync(shardName(kb, s.index), replicaName(shardName(kb, s.index), r));

    const modes = ["keyword", "vector", "hybrid"].map((search_mode) => ({
      queries: ["ocean topic item7"],
      search_metadata: { top_k: 8 },
      config: { retrieval_config: { search_mode } },
    }));
    for (const body of modes) {
      const primary = (await query(key, kb, body)).items;
      expect(primary.length).toBeGreaterThan(0);
      for (let i = 0; i < 3; i++) expect(await replicaQuery(key, kb, body)).toEqual(primary);
    }
    const counts = await Promise.all(
      map.shards.flatMap((s) => Array.from({ length: REPLICAS }, (_, r) => replica(kb, r + 1, s.index).replicaStats())),
    );
    for (const c of counts) expect(c.served).toBeGreaterThan(0);
  });

  it("copy a base pulled in pieces row for row: rowids, ids, token counts and vectors", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const docs = Array.from({ length: 45 }, (_, i) => ({
      name: `piece-${i}.txt`,
      text: `Piece ${i} of a base pulled in several calls, about item${i} and the ocean.`,
    }));
    await indexBatches(key, kb, docs);
    await replica(kb, 1).replicaSync(kb, replicaName(kb, 1));
    const rows = (stub: ReturnType<typeof shardStub>) =>
      runInDurableObject(stub, (_instance, state) =>
        state.storage.sql
          .exec("SELECT rowid, id, document_id, position, text, metadata, tokens FROM items ORDER BY rowid")
          .toArray(),
      );
    const primaryRows = await rows(shardStub(kb, 0));
    expect(primaryRows).toHaveLength(45);
    expect(await rows(replica(kb, 1))).toEqual(primaryRows);
    const [p, r] = await Promise.all([shardStub(kb, 0).stats(), replica(kb, 1).stats()]);
    expect(r).toEqual(p);
    const body = { queries: ["ocean item17"], search_metadata: { top_k: 5 } };
    const primary = (await query(key, kb, body)).items;
    for (let i = 0; i < 3; i++) expect(await replicaQuery(key, kb, body)).toEqual(primary);
  });
});
