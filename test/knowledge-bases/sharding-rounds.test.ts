import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, type Body } from "./kb-fixtures";
import { forceSmallShards, indexBatches, shardStub, splitUntilSettled } from "./shard-fixtures";
import type { ShardInfo } from "../../src/features/knowledge-bases/index/shard-map";
import type {
  StageKind,
  StageOf,
  StageRequest,
  StageResults,
} from "../../src/features/knowledge-bases/index/shard-stages";
import type { RetrieveRequest } from "../../src/features/knowledge-bases/index/retrieval";
import { ShardScatter } from "../../src/features/knowledge-bases/shard-scatter";
import { ShardedRetrieval } from "../../src/features/knowledge-bases/sharded-retrieval";

/**
 * What a sharded query asks its shards, step by step: the steps cut from it (vector feedback's two
 * rounds, scored in the Worker from the int8 vectors the shards sent with their candidates; BM25's
 * first pass asking each shard for the feedback head only) must leave the answer exactly as the
 * shards' own steps give it, and as one index gives it.
 */

/** Every request a query sends to its shards, in order (the real shards answer them). */
class Recording extends ShardScatter {
  readonly asked: StageRequest[] = [];

  private record<K extends StageKind>(make: (shard: ShardInfo) => StageOf<K>): (shard: ShardInfo) => StageOf<K> {
    return (shard) => {
      const request = make(shard);
      this.asked.push(request);
      return request;
    };
  }

  override all<K extends StageKind>(request: StageOf<K> | ((shard: ShardInfo) => StageOf<K>)) {
    return super.all<K>(this.record((s) => (typeof request === "function" ? request(s) : request)));
  }

  override some<K extends StageKind>(indexes: Set<number>, request: (shard: ShardInfo) => StageOf<K>) {
    return super.some<K>(indexes, this.record(request));
  }

  override byShard<K extends StageKind>(keys: number[], make: (rowids: number[], shard: ShardInfo) => StageOf<K>) {
    return super.byShard<K>(keys, (rowids, shard) => this.record((s) => make(rowids, s))(shard));
  }

  kinds(): StageKind[] {
    return this.asked.map((r) => r.kind);
  }
}

/** The same, with the int8 vectors dropped from every answer: the Worker must then ask the shards. */
class WithoutAhead extends Recording {
  override async all<K extends StageKind>(request: StageOf<K> | ((shard: ShardInfo) => StageOf<K>)) {
    const answers = await super.all<K>(request);
    for (const [, answer] of answers) {
      const a = answer as StageResults["stats"] | StageResults["keyword"];
      if ("codes" in a) delete a.codes;
      if ("extras" in a) delete a.extras.codes;
    }
    return answers;
  }
}

/** Reports whose words overlap, so feedback finds shared stems; every 4th shares a fixed length and words. */
function reports(n: number): { name: string; text: string; meta: Body }[] {
  const topics = ["turbine blade stall", "nozzle flow", "compressor surge", "wing flutter"];
  return Array.from({ length: n }, (_, i) => ({
    name: `report-${i}.txt`,
    text: `Report ${i}\n\nThe ${topics[i % 4]} report covers item${i} and ${topics[(i + 1) % 4]} with notes${i % 5}.`,
    meta: { n: i },
  }));
}

async function shardedBase(docs: { name: string; text: string; meta: Body }[]) {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  const kb = await createKb(key);
  await indexBatches(key, kb, docs);
  const single = await createKb(key);
  await indexBatches(key, single, docs);
  await forceSmallShards(kb, Math.ceil(docs.length / 4), 10);
  const map = await splitUntilSettled(kb);
  expect(map.shards.length).toBeGreaterThanOrEqual(3);
  return { key, kb, single, map };
}

/** A stored chunk's vector (one holding `stem`), as a query embedding of the base's own dimensions. */
async function someVector(kb: string, shard: ShardInfo, stem: string): Promise<number[]> {
  const range = { lo: shard.lo, hi: shard.hi };
  const hits = (await shardStub(kb, shard.index).stage(range, {
    kind: "keyword",
    stems: [[stem, 1]],
    stats: { chunks: 100, total: 1000, df: { [stem]: 10 } },
    depth: 3,
  })) as unknown as { result: { hits: { ids: Float64Array } } };
  const rowids = [...hits.result.hits.ids];
  expect(rowids.length).toBeGreaterThan(0);
  const vectors = (await shardStub(kb, shard.index).stage(range, { kind: "vectorsOf", rowids })) as unknown as {
    result: StageResults["vectorsOf"];
  };
  return vectors.result[0].values;
}

function request(text: string, vector: number[], extra: Partial<RetrieveRequest> = {}): RetrieveRequest {
  return {
    queries: [{ text, vector }],
    mode: "hybrid",
    fusion: "weighted",
    alpha: 0.5,
    dataFusion: "rrf",
    depth: 50,
    topK: 30,
    unit: "chunks",
    ...extra,
  };
}

const ranked = (r: Awaited<ReturnType<ShardedRetrieval["retrieve"]>>) => r.ranked.map((c) => [c.chunk.id, c.score]);

describe("a sharded query's steps", () => {
  it("scores vector feedback in the Worker from the shards' int8 vectors: no vectorsOf or nearestAmong step, the same answer", async () => {
    const { kb, map } = await shardedBase(reports(60));
    const vector = await someVector(kb, map.shards[0], "turbin");
    for (const [text, extra] of [
      ["turbine blade stall report", {}],
      ["compressor surge report notes", { topK: 10, depth: 60 }],
      ["wing flutter", { fusion: "rrf" as const }],
    ] as const) {
      const cut = new Recording(env, kb, map);
      const asking = request(text, vector, extra);
      const fast = await new ShardedRetrieval(cut).retrieve(asking);
      expect(fast.ranked.length).toBeGreaterThan(5);
      expect(cut.kinds()).not.toContain("nearestAmong");
      expect(cut.kinds()).not.toContain("vectorsOf");
      const stats = cut.asked.find((r) => r.kind === "stats") as StageOf<"stats">;
      expect(stats.nearest?.codes).toBe(asking.depth);

      const asked = new WithoutAhead(env, kb, map);
      const slow = await new ShardedRetrieval(asked).retrieve(request(text, vector, extra));
      expect(asked.kinds()).toContain("nearestAmong");
      expect(asked.kinds()).toContain("vectorsOf");
      expect(ranked(fast)).toEqual(ranked(slow));
    }
  });

  it("asks each shard for the feedback head only in BM25's first pass, and ranks as one index with ties across shards", async () => {
    // Every document alike but for its number and one word after the query's: equal BM25 scores
    // for "blade" across every shard, each with its own feedback words.
    const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    const docs = Array.from({ length: 48 }, (_, i) => ({
      name: `tie-${i}.txt`,
      text: `Note\n\nblade ${words[i % 8]} ${words[(i + 3) % 8]} ${words[(i + 5) % 8]}`,
      meta: { n: i },
    }));
    const { key, kb, single, map } = await shardedBase(docs);
    const keyword = {
      queries: ["blade"],
      search_metadata: { top_k: 100 },
      config: { retrieval_config: { search_mode: "keyword" } },
    };
    const one = await query(key, single, keyword);
    const many = await query(key, kb, keyword);
    expect(many.items.length).toBe(48);
    expect(many.items.map((i) => [(i.metadata as Body).n, i.score])).toEqual(
      one.items.map((i) => [(i.metadata as Body).n, i.score]),
    );
    const hybrid = { queries: ["blade alpha"], search_metadata: { top_k: 100 } };
    expect((await query(key, kb, hybrid)).items.map((i) => [(i.metadata as Body).n, i.score])).toEqual(
      (await query(key, single, hybrid)).items.map((i) => [(i.metadata as Body).n, i.score]),
    );

    const cut = new Recording(env, kb, map);
    await new ShardedRetrieval(cut).retrieve(request("blade", await someVector(kb, map.shards[0], "blade")));
    const passes = cut.asked.filter((r): r is StageOf<"keyword"> => r.kind === "keyword");
    expect(passes.length).toBe(map.shards.length * 2);
    expect(passes.slice(0, map.shards.length).every((r) => r.head === 5)).toBe(true);
    expect(passes.slice(map.shards.length).every((r) => r.head === undefined)).toBe(true);
  });
});
