import { env, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { VectorStore } from "../../src/features/knowledge-bases/index/vector-store";
import { seedOrg } from "../helpers";
import { type Body, createKb, indexText, query, send } from "./kb-fixtures";

/**
 * The first call after a wake answers from SQLite's row buffers (cold-vectors.ts) instead of
 * loading the arena first: every answer must equal the loaded store's, to the bit, ties included.
 * A fresh VectorStore over the same SQLite is what an evicted object's next instance holds.
 */
const stub = (name: string) => env.KB_INDEX.get(env.KB_INDEX.idFromName(name));

function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s / 2 ** 32) * 2 - 1;
  };
}

function unit(rnd: () => number, dims: number): number[] {
  const v = Array.from({ length: dims }, rnd);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

/** `n` unit vectors of `dims`, every 7th from rowid 100 on a copy of one vector (ties in the pool and the top). */
function vectors(n: number, dims: number, seed: number): { rowid: number; values: number[] }[] {
  const rnd = random(seed);
  const shared = unit(rnd, dims);
  return Array.from({ length: n }, (_, i) => ({
    rowid: i + 1,
    values: i >= 100 && i % 7 === 0 ? shared : unit(rnd, dims),
  }));
}

type Case = { query: number[]; topK: number; allowed?: Set<number> };

function cases(all: { rowid: number; values: number[] }[], dims: number): Case[] {
  const rnd = random(99);
  const shared = all[105].values;
  const dense = new Set(all.filter((v) => v.rowid % 2 === 0).map((v) => v.rowid));
  const sparse = new Set(all.filter((v) => v.rowid % 23 === 0).map((v) => v.rowid));
  const out: Case[] = [];
  for (const query of [unit(rnd, dims), shared, unit(rnd, dims)])
    for (const topK of [1, 10, 40])
      for (const allowed of [undefined, dense, sparse, new Set<number>([3, 9_999])]) out.push({ query, topK, allowed });
  return out;
}

describe("knowledge bases: the first query after a wake reads vectors straight from SQLite (issue 18)", () => {
  for (const dims of [48, 64]) {
    it(`answers nearest, scan and valuesOf cold exactly as the loaded store, over several blocks with holes, filters and ties (${dims} dimensions)`, async () => {
      await runInDurableObject(stub(`cold-${dims}`), (_instance, state) => {
        const sql = state.storage.sql;
        const all = vectors(1500, dims, dims);
        const writer = new VectorStore(sql);
        writer.write(all.slice(0, 900));
        writer.write(all.slice(900));
        // Holes: removals swap the last vectors into freed slots, so slots no longer follow rowids.
        writer.remove([2, 50, 51, 400, 777, 1200, 1499]);
        const kept = all.filter((v) => ![2, 50, 51, 400, 777, 1200, 1499].includes(v.rowid));
        expect(sql.exec<{ n: number }>("SELECT count(*) AS n FROM vector_blocks").one().n).toBeGreaterThan(2);

        const loaded = new VectorStore(sql);
        expect(loaded.size).toBe(kept.length);
        expect(loaded.inArena).toBe(true);
        let tiesAtCut = 0;
        for (const c of cases(kept, dims)) {
          const warm = loaded.nearest(c.query, c.topK, c.allowed);
          const cold = new VectorStore(sql);
          expect(cold.nearest(c.query, c.topK, c.allowed)).toEqual(warm);
          // The answer came from SQLite's buffers: the arena is loaded after the call, not before.
          expect(cold.inArena).toBe(false);
          expect(cold.scan(c.query, c.topK * 2 + 64, c.allowed)).toEqual(
            loaded.scan(c.query, c.topK * 2 + 64, c.allowed),
          );
          expect(cold.scan(c.query, undefined, c.allowed)).toEqual(loaded.scan(c.query, undefined, c.allowed));
          expect(cold.inArena).toBe(false);
          if (warm.length > 1 && warm[warm.length - 1].score === warm[warm.length - 2].score) tiesAtCut++;
        }
        // The shared vector's copies tie at the cut of the top (and of the pool, 60+ of them).
        expect(tiesAtCut).toBeGreaterThan(0);
        const cold = new VectorStore(sql);
        for (const rowid of [1, 3, 105, 512, 1498, 1500, 2, 9_999])
          expect(cold.valuesOf(rowid)).toEqual(loaded.valuesOf(rowid));
        expect(cold.inArena).toBe(false);
        expect(cold.size).toBe(kept.length);
        expect(cold.dims).toBe(dims);
      });
    });
  }

  it("a write after a cold call loads the arena from SQLite and answers as a store that never went cold", async () => {
    await runInDurableObject(stub("cold-write"), (_instance, state) => {
      const sql = state.storage.sql;
      const all = vectors(1200, 32, 5);
      new VectorStore(sql).write(all.slice(0, 1100));
      const store = new VectorStore(sql);
      const query = all[1150].values;
      expect(store.nearest(query, 5).map((r) => r.rowid)).not.toContain(1151);
      expect(store.inArena).toBe(false);
      store.write(all.slice(1100));
      store.remove([7, 8]);
      expect(store.inArena).toBe(true);
      const top = store.nearest(query, 5);
      expect(top[0].rowid).toBe(1151);
      const fresh = new VectorStore(sql);
      expect(fresh.size).toBe(1198);
      expect(top).toEqual(fresh.nearest(query, 5));
      for (const allowed of [new Set([1, 2, 3, 1151]), undefined])
        expect(new VectorStore(sql).nearest(query, 5, allowed)).toEqual(fresh.nearest(query, 5, allowed));
    });
  });

  it("an empty or dimensionless store answers nothing cold", async () => {
    await runInDurableObject(stub("cold-empty"), (_instance, state) => {
      const store = new VectorStore(state.storage.sql);
      expect(store.nearest([1, 0, 0], 3)).toEqual([]);
      expect(store.scan([1, 0, 0], 10, undefined)).toEqual([]);
      expect(store.valuesOf(1)).toBeUndefined();
      expect(store.size).toBe(0);
    });
  });

  it("through the Worker: filtered queries after an eviction (a dense and a sparse filter, a deleted document) answer as the warm object", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    const words = ["flow", "plate", "shock", "wing", "heat", "boundary", "layer", "pressure", "nozzle", "vortex"];
    const sentences = (n: number, salt: number) =>
      Array.from(
        { length: n },
        (_, i) =>
          `Sentence ${i} on ${words[(i * salt) % 10]} and ${words[(i + salt) % 10]} near ${words[(i * 3) % 10]}.`,
      ).join(" ");
    await indexText(key, kb, "a.txt", sentences(400, 3), { topic: "aero" });
    const gone = await indexText(key, kb, "b.txt", sentences(100, 7), { topic: "heat" });
    await indexText(key, kb, "c.txt", sentences(250, 11), { topic: "heat" });
    await indexText(key, kb, "d.txt", sentences(30, 13), { topic: "rare" });
    expect(
      (await send(`/v1/knowledge-base/${kb}/documents?document_ids=${gone}`, key, { method: "DELETE" })).status,
    ).toBe(200);
    const dense = JSON.stringify({ must_not: [{ key: "topic", match: { value: "rare" } }] });
    const sparse = JSON.stringify({ must: [{ key: "topic", match: { value: "rare" } }] });
    const bodies: Body[] = [];
    for (const filter of [dense, sparse])
      for (const mode of ["vector", "hybrid"])
        bodies.push({
          queries: ["shock wing near vortex"],
          search_metadata: { top_k: 10, filter },
          config: { retrieval_config: { search_mode: mode } },
        });
    const answer = async (body: Body) => (await query(key, kb, body)).items.map((i) => [i.id, i.score]);
    const warm = [];
    for (const body of bodies) warm.push(await answer(body));
    expect(warm.every((w) => w.length === 10)).toBe(true);
    for (const [i, body] of bodies.entries()) {
      await evictDurableObject(env.KB_INDEX.get(env.KB_INDEX.idFromName(kb)));
      expect(await answer(body)).toEqual(warm[i]);
    }
  });
});
