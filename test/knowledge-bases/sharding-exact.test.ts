import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, loadCollection, splitUntilSettled } from "./shard-fixtures";

/**
 * A sharded knowledge base ranks exactly as one index does: a collection is indexed into one
 * knowledge base, a fixed sample of its queries is answered by the single index, the base is then
 * split into several shards (a test-only low threshold) and every answer must come back the same:
 * the full ranked list, ids and scores, in each search mode and through filters and shaping.
 */
const modes: [string, Body][] = [
  ["hybrid (default)", {}],
  ["keyword", { retrieval_config: { search_mode: "keyword" } }],
  ["vector", { retrieval_config: { search_mode: "vector" } }],
];

function ranking(items: Body[]): [unknown, unknown][] {
  return items.map((i) => [i.id, i.score]);
}

/** The requests compared: every 4th query in the default mode, every 12th in keyword and vector mode, and downstream options on 12. */
function requests(queries: string[], narrow: unknown[]): Body[] {
  const out: Body[] = [];
  for (const [i, q] of queries.entries())
    for (const [m, config] of modes)
      if (i % 12 === 0 || (i % 4 === 0 && m === "hybrid (default)"))
        out.push({ queries: [q], config, search_metadata: { top_k: 100 } });
  for (const q of queries.slice(0, 12)) {
    out.push(
      // Reciprocal rank fusion (the default is weighted z-score fusion).
      { queries: [q], config: { hybrid_search_config: { fusion_method: "rrf" } }, search_metadata: { top_k: 100 } },
      { queries: [q], config: { retrieval_unit: "documents" }, search_metadata: { top_k: 20 } },
      { queries: [q], search_metadata: { top_k: 100, filter: { must: [{ key: "odd", match: { value: true } }] } } },
      // A filter admitting few chunks: the vector side's exact path instead of the int8 pool.
      { queries: [q], search_metadata: { top_k: 100, filter: { must: [{ key: "doc", match: { any: narrow } }] } } },
      { queries: [q], config: { retrieval_config: { max_documents: 3 } }, search_metadata: { top_k: 10 } },
      { queries: [q], search_metadata: { top_k: 10, group_by_key: "odd" } },
      { queries: [q, queries[0]], config: { retrieval_config: { search_mode: "keyword" } } },
      { queries: [q], config: { expand_query: true } },
    );
  }
  return out;
}

for (const name of ["cranfield", "cisi"] as const) {
  const collection = loadCollection(name);
  describe.skipIf(!collection)(`sharded ranking on ${name}`, () => {
    it("gives every query the ranked list the unsharded index gave", { timeout: 600_000 }, async () => {
      if (!collection) return;
      const org = await seedOrg();
      const key = org.owner.apiKey;
      const kb = await createKb(key);
      await indexBatches(key, kb, collection.docs);
      const asked = requests(
        collection.queries,
        collection.docs.filter((_, i) => i % 20 === 0).map((d) => d.meta.doc),
      );
      const run = async () => {
        const out: { status: number; body: Body; items: Body[] }[] = [];
        for (let i = 0; i < asked.length; i += 4)
          out.push(...(await Promise.all(asked.slice(i, i + 4).map((r) => query(key, kb, r)))));
        return out;
      };
      const single = await run();
      await forceSmallShards(kb, Math.ceil(collection.docs.length / 5));
      const map = await splitUntilSettled(kb);
      expect(map.shards.length).toBeGreaterThanOrEqual(4);
      const sharded = await run();
      let compared = 0;
      for (const [i, request] of asked.entries()) {
        expect(single[i].status, JSON.stringify(single[i].body)).toBe(200);
        expect(sharded[i].status).toBe(200);
        expect(sharded[i].body.result).not.toHaveProperty("partial");
        expect(ranking(sharded[i].items), `${name}: ${JSON.stringify(request)}`).toEqual(ranking(single[i].items));
        compared += single[i].items.length;
      }
      expect(compared).toBeGreaterThan(asked.length * 30);
    });
  });
}
