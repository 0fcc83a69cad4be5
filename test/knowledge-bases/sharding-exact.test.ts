import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, loadCollection, splitUntilSettled } from "./shard-fixtures";

/**
 * A sharded knowledge base ranks exactly as one index does: the same collection indexed into two
 * knowledge bases the same way, one then split into several shards (a test-only low threshold),
 * and every query's full ranked list compared, ids and scores, in each search mode.
 */
const modes: [string, Body][] = [
  ["hybrid (default)", {}],
  ["keyword", { retrieval_config: { search_mode: "keyword" } }],
  ["vector", { retrieval_config: { search_mode: "vector" } }],
];

/** Each result as (collection document, chunk position, score): ids differ between the two knowledge bases. */
function ranking(items: Body[]): [string, unknown][] {
  return items.map((i) => {
    const id = String(i.id);
    return [`${(i.metadata as Body).doc}:${id.includes("-") ? id.split("-").pop() : "document"}`, i.score];
  });
}

for (const name of ["cranfield", "cisi"] as const) {
  const collection = loadCollection(name);
  describe.skipIf(!collection)(`sharded ranking on ${name}`, () => {
    it("gives every query the unsharded index's ranked list, in every mode", { timeout: 600_000 }, async () => {
      if (!collection) return;
      const org = await seedOrg();
      const key = org.owner.apiKey;
      const single = await createKb(key);
      const sharded = await createKb(key);
      await indexBatches(key, single, collection.docs);
      await indexBatches(key, sharded, collection.docs);
      await forceSmallShards(sharded, Math.ceil(collection.docs.length / 5));
      const map = await splitUntilSettled(sharded);
      expect(map.shards.length).toBeGreaterThanOrEqual(4);

      const compare = async (q: string, body: Body, top = 100) => {
        const request = { queries: [q], ...body, search_metadata: { top_k: top, ...(body.search_metadata as Body) } };
        const [a, b] = await Promise.all([query(key, single, request), query(key, sharded, request)]);
        expect(a.status).toBe(200);
        expect(b.status).toBe(200);
        expect(b.body.result).not.toHaveProperty("partial");
        expect(ranking(b.items), `${name} ${JSON.stringify(body)}: ${q}`).toEqual(ranking(a.items));
        return a.items.length;
      };
      // A fixed sample: every 4th query in the default mode, every 12th in keyword and vector mode.
      let compared = 0;
      for (const [i, q] of collection.queries.entries())
        for (const [m, config] of modes)
          if (i % 12 === 0 || (i % 4 === 0 && m === "hybrid (default)")) compared += await compare(q, { config });
      expect(compared).toBeGreaterThan(collection.queries.length * 20);
      const narrow = collection.docs.filter((_, i) => i % 20 === 0).map((d) => d.meta.doc);
      // Downstream of the merge: reciprocal rank fusion (the default is weighted z-score fusion), documents as the unit, a filter,
      // max_documents, group_by_key, two queries fused.
      for (const q of collection.queries.slice(0, 12)) {
        await compare(q, { config: { hybrid_search_config: { fusion_method: "rrf" } } });
        await compare(q, { config: { retrieval_unit: "documents" } }, 20);
        await compare(q, { search_metadata: { filter: { must: [{ key: "odd", match: { value: true } }] } } });
        // A filter admitting few chunks: the vector side's exact path instead of the int8 pool.
        await compare(q, { search_metadata: { filter: { must: [{ key: "doc", match: { any: narrow } }] } } });
        await compare(q, { config: { retrieval_config: { max_documents: 3 } } }, 10);
        await compare(q, { search_metadata: { group_by_key: "odd" } }, 10);
        await compare(q, {
          queries: [q, collection.queries[0]],
          config: { retrieval_config: { search_mode: "keyword" } },
        });
      }
    });
  });
}
