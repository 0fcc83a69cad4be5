import { env, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { type Body, createKb, indexText, query, seedCorpus, send } from "./kb-fixtures";
import { loadCollection } from "./shard-fixtures";
import { porterStem } from "../../src/features/knowledge-bases/index/porter-stemmer";

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

  it("answers the first query after an eviction exactly as the warm object does, over several vector blocks with holes", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 16 });
    const words = ["flow", "plate", "shock", "wing", "heat", "boundary", "layer", "pressure", "nozzle", "vortex"];
    const sentences = (n: number, salt: number) =>
      Array.from(
        { length: n },
        (_, i) =>
          `Sentence ${i} on ${words[(i * salt) % 10]} and ${words[(i + salt) % 10]} near ${words[(i * 3) % 10]} ${i % 13}.`,
      ).join(" ");
    // More than 512 vectors (one stored block), then a deleted document in the middle: rowids no
    // longer match slots (the removal swaps the last vectors into the freed slots).
    await indexText(key, kb, "a.txt", sentences(450, 3));
    const middle = await indexText(key, kb, "b.txt", sentences(120, 7));
    await indexText(key, kb, "c.txt", sentences(300, 11));
    const del = await send(`/v1/knowledge-base/${kb}/documents?document_ids=${middle}`, key, { method: "DELETE" });
    expect(del.status).toBe(200);
    const vectors = await runInDurableObject(kbStub(kb), async (instance) => (await instance.stats()).vectors);
    expect(vectors).toBeGreaterThan(512);
    const bodies = [
      { queries: ["shock wing vortex"], search_metadata: { top_k: 10 } },
      { queries: ["heat boundary layer near nozzle"], config: { retrieval_config: { search_mode: "vector" } } },
      { queries: ["pressure plate"], config: { retrieval_config: { search_mode: "keyword" } } },
    ];
    // Full scores, not rounded: the reloaded object must give the same numbers to the bit.
    const answer = async (body: Body) => (await query(key, kb, body)).items.map((i) => [i.id, i.score]);
    const warm = [];
    for (const body of bodies) warm.push(await answer(body));
    expect(warm.every((w) => w.length === 10)).toBe(true);
    for (const [i, body] of bodies.entries()) {
      await evictDurableObject(kbStub(kb));
      expect(await answer(body)).toEqual(warm[i]);
    }
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

  it("stems every word of the Cranfield and CISI vocabularies in JavaScript exactly as FTS5's porter tokenizer does", async () => {
    const collections = (["cranfield", "cisi"] as const).flatMap((name) => loadCollection(name) ?? []);
    const texts = collections.flatMap((c) => [...c.docs.map((d) => d.text), ...c.queries]);
    // Without the collections, the words of the test corpus and the rules' edge cases still run.
    texts.push(
      "caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou communism activate angulariti homologous effective bowdlerize probate rate cease controll roll eed aing ies sses ss yyy 3d a1b2c3 2024 boundary-layer",
    );
    const words = [...new Set(texts.flatMap((t) => t.toLowerCase().match(/[a-z0-9]+/g) ?? []))];
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kb, "one.txt", "One chunk, so the index object exists.");
    const fts5 = await runInDurableObject(kbStub(kb), (_instance, state) => {
      const sql = state.storage.sql;
      const out: Record<string, string[]> = {};
      for (let i = 0; i < words.length; i += 45) {
        const part = words.slice(i, i + 45);
        sql.exec(
          `INSERT INTO scratch_fts (rowid, text) VALUES ${part.map(() => "(?, ?)").join(", ")}`,
          ...part.flatMap((word, j) => [i + j + 1, word]),
        );
      }
      for (const row of sql.exec<{ term: string; doc: number }>("SELECT term, doc FROM scratch_words").toArray())
        (out[words[row.doc - 1]] ??= []).push(row.term);
      sql.exec("DELETE FROM scratch_fts");
      return out;
    });
    const differing = words.filter((w) => {
      const js = porterStem(w);
      return js !== undefined && JSON.stringify([js]) !== JSON.stringify(fts5[w]);
    });
    // The collections' vocabularies hold thousands of words; the edge cases alone about a hundred.
    expect(words.length).toBeGreaterThan(collections.length > 0 ? 5000 : 80);
    expect(differing.map((w) => [w, porterStem(w), fts5[w]])).toEqual([]);
    // Only the rules' degenerate cases are left to FTS5.
    expect(words.filter((w) => porterStem(w) === undefined).length).toBeLessThan(5);
  });
});
