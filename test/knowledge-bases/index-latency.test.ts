import { env, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, indexText, query, seedCorpus } from "./kb-fixtures";

const kbStub = (kbId: string) => env.KB_INDEX.get(env.KB_INDEX.idFromName(kbId));

type Stored = { term: string; rows: number[]; tfs: number[] };

describe("knowledge bases: the index object's latency work (issue 18)", () => {
  it("splits a long posting list across warm slices and stores the same lists as one unsliced pass", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 32 });
    await seedCorpus(key, kb);
    // "flow" in every chunk, several times in some: a list far longer than the slices below.
    const text = Array.from(
      { length: 80 },
      (_, i) => `Flow ${i % 4 === 0 ? "flow flow" : ""} over plate ${i} changes pressure and heat ${i % 7}.`,
    ).join(" ");
    await indexText(key, kb, "flows.txt", text);
    const body = { queries: ["flow pressure plate"], search_metadata: { top_k: 10 } };
    const before = (await query(key, kb, body)).items.map((i) => [i.id, Number(i.score).toFixed(6)]);

    const pass = async (sliceRows: number) =>
      runInDurableObject(kbStub(kb), (instance, state) => {
        const sql = state.storage.sql;
        sql.exec("DELETE FROM postings_cache");
        sql.exec("DELETE FROM meta WHERE key IN ('stored_postings', 'warm_after', 'warm_done', 'warm_part')");
        let slices = 1;
        let insideTerm = 0;
        while (!instance.warmPostings(sliceRows)) {
          slices++;
          if (sql.exec("SELECT 1 FROM meta WHERE key = 'warm_part'").toArray().length) insideTerm++;
        }
        const stored = sql
          .exec<{ term: string; rows: ArrayBuffer; tfs: ArrayBuffer }>(
            "SELECT term, rows, tfs FROM postings_cache ORDER BY term",
          )
          .toArray()
          .map((r): Stored => ({ term: r.term, rows: [...new Int32Array(r.rows)], tfs: [...new Uint16Array(r.tfs)] }));
        const parts = sql.exec<{ n: number }>("SELECT count(*) AS n FROM postings_parts").one().n;
        return { slices, insideTerm, stored, parts };
      });
    const whole = await pass(1_000_000);
    expect(whole.slices).toBe(1);
    const sliced = await pass(7);
    // Slices stopped inside a term (the long "flow" list) and left no parts behind.
    expect(sliced.insideTerm).toBeGreaterThan(0);
    expect(sliced.parts).toBe(0);
    expect(sliced.stored).toEqual(whole.stored);
    const flow = sliced.stored.find((s) => s.term === "flow");
    expect(flow?.rows.length).toBeGreaterThan(7);
    expect(flow?.tfs.some((tf) => tf > 1)).toBe(true);

    await evictDurableObject(kbStub(kb));
    expect((await query(key, kb, body)).items.map((i) => [i.id, Number(i.score).toFixed(6)])).toEqual(before);
  });

  it("a write during a pass stopped inside a term starts the pass over", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 32 });
    await indexText(key, kb, "flows.txt", Array.from({ length: 40 }, (_, i) => `Flow over plate ${i}.`).join(" "));
    const stopped = await runInDurableObject(kbStub(kb), (instance, state) => {
      state.storage.sql.exec("DELETE FROM meta WHERE key IN ('warm_after', 'warm_done', 'warm_part')");
      while (!state.storage.sql.exec("SELECT 1 FROM meta WHERE key = 'warm_part'").toArray().length)
        if (instance.warmPostings(3)) return false;
      return true;
    });
    expect(stopped).toBe(true);
    await indexText(key, kb, "more.txt", "Flow separation over a flat plate.");
    const left = await runInDurableObject(kbStub(kb), (_instance, state) => ({
      meta: state.storage.sql
        .exec("SELECT key FROM meta WHERE key IN ('warm_after', 'warm_done', 'warm_part')")
        .toArray(),
      parts: state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM postings_parts").one().n,
    }));
    expect(left).toEqual({ meta: [], parts: 0 });
  });
});
