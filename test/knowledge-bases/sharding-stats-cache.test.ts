import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, send, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardMap, shardStub, splitUntilSettled } from "./shard-fixtures";
import type { StageOf, StatsResult } from "../../src/features/knowledge-bases/index/shard-stages";

/**
 * A sharded query keeps what shards answered between queries (feedback stems' document
 * frequencies in the Worker under each shard's statistics version, title stems in each shard):
 * nothing kept may outlive a write. Each case compares the sharded base with an unsharded twin
 * holding the same documents, after writes that change exactly what is kept.
 */

/** Turbine reports: a keyword query for "turbine" takes its feedback stems (blade, stall, ...) from them. */
function turbines(n: number, offset = 0): { name: string; text: string; meta: Body }[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `turbine-${i + offset}.txt`,
    text: `Turbine ${i + offset}\n\nThe turbine blade ${(i + offset) % 3 === 0 ? "compressor" : "nozzle"} stall report item${i + offset}.`,
    meta: { n: i + offset },
  }));
}

/** Notes full of the feedback stems and without "turbine": they move those stems' document frequencies only. */
function notes(n: number, offset: number): { name: string; text: string; meta: Body }[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `notes-${i + offset}.txt`,
    text: `Blade stall ${i + offset}\n\nblade stall compressor nozzle report notes item${i + offset} blade stall.`,
    meta: { n: i + offset },
  }));
}

/**
 * Every answer here stays under the title boost's 50-row head and the depth, so no cut falls
 * between equal scores: documents written after the split get rowids the unsharded twin does not
 * share, and equal scores are ordered by rowid.
 */
const turbine = {
  queries: ["turbine blade"],
  search_metadata: { top_k: 100 },
  config: { retrieval_config: { search_mode: "keyword" } },
};

/** Chunks by their document's number with their scores, in score order (ties by number). */
function ranked(items: Body[]): [number, unknown][] {
  return items
    .map((i): [number, number] => [Number((i.metadata as Body).n), Number(i.score)])
    .sort((a, b) => b[1] - a[1] || a[0] - b[0]);
}

async function versions(kb: string): Promise<string[]> {
  const map = await shardMap(kb);
  const stats: StageOf<"stats"> = { kind: "stats", words: [], frequencies: false, stems: [] };
  const out: string[] = [];
  for (const s of map.shards) {
    const answer = (await shardStub(kb, s.index).stage({ lo: s.lo, hi: s.hi }, stats)) as unknown as {
      result: StatsResult;
    };
    out.push(answer.result.version);
  }
  return out;
}

describe("what a sharded query keeps between queries", () => {
  it("never outlives a write: feedback document frequencies and titles follow every write", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const single = await createKb(key);
    await indexBatches(key, kb, turbines(30));
    await indexBatches(key, single, turbines(30));
    await forceSmallShards(kb, 12, 5);
    const map = await splitUntilSettled(kb);
    expect(map.shards.length).toBeGreaterThanOrEqual(3);

    // The same query twice: the second one reads the kept frequencies (the versions did not move).
    const first = await query(key, kb, turbine);
    expect(first.items.length).toBeGreaterThan(10);
    expect(ranked(first.items)).toEqual(ranked((await query(key, single, turbine)).items));
    const before = await versions(kb);
    expect(ranked((await query(key, kb, turbine)).items)).toEqual(ranked(first.items));
    expect(await versions(kb)).toEqual(before);

    // Writes that move the feedback stems' document frequencies in some shards, and new titles.
    await indexBatches(key, kb, notes(8, 100));
    await indexBatches(key, single, notes(8, 100));
    await indexBatches(key, kb, turbines(4, 200));
    await indexBatches(key, single, turbines(4, 200));
    const after = await versions(kb);
    expect(after.some((v, i) => v !== before[i])).toBe(true);
    const a = await query(key, single, turbine);
    const b = await query(key, kb, turbine);
    expect(b.body.result).not.toHaveProperty("partial");
    expect(ranked(b.items)).toEqual(ranked(a.items));
    expect(ranked(b.items)).not.toEqual(ranked(first.items));

    // A deletion too (a deleted row's rowid may come back with other text).
    for (const base of [kb, single]) {
      const docs = (await send(`/v1/knowledge-base/${base}/documents`, key)).body.documents as Body[];
      const gone = docs.filter((d) => ["turbine-3.txt", "turbine-202.txt", "notes-104.txt"].includes(String(d.name)));
      expect(gone).toHaveLength(3);
      const res = await send(
        `/v1/knowledge-base/${base}/documents?document_ids=${gone.map((d) => d._id).join(",")}`,
        key,
        { method: "DELETE" },
      );
      expect(res.status).toBe(200);
    }
    await indexBatches(key, kb, turbines(2, 300));
    await indexBatches(key, single, turbines(2, 300));
    const c = await query(key, single, turbine);
    const d = await query(key, kb, turbine);
    expect(ranked(d.items)).toEqual(ranked(c.items));
    // Hybrid (the default) over the same writes: its feedback and title steps read what is kept too.
    const hybrid = { queries: ["turbine blade"], search_metadata: { top_k: 100 } };
    expect(ranked((await query(key, kb, hybrid)).items)).toEqual(ranked((await query(key, single, hybrid)).items));
  });
});
