import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { VectorIndex } from "../../src/features/knowledge-bases/index/vector-index";
import { InObjectVectorIndex } from "./in-object-vector-index";
import { VectorizeVectorIndex } from "../../src/features/knowledge-bases/vectorize-adapter";
import { parseOpenSearchFilter, parseQdrantFilter } from "../../src/features/knowledge-bases/metadata-filter";
import { FakeVectorize } from "./fake-vectorize";

/** Unit vector pointing mostly along axis `i` of 8, so nearest neighbours are predictable. */
function axis(i: number, wobble = 0): number[] {
  const v = Array.from({ length: 8 }, (_, j) => (j === i ? 1 : j === (i + 1) % 8 ? wobble : 0));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

const VECTORS = [
  { id: "a", values: axis(0), metadata: { color: "red", size: 1, document_id: "d1" } },
  { id: "b", values: axis(0, 0.4), metadata: { color: "blue", size: 2, document_id: "d1" } },
  { id: "c", values: axis(1), metadata: { color: "red", size: 3, document_id: "d2" } },
  { id: "d", values: axis(2), metadata: { color: "green", size: 4, document_id: "d3" } },
];

/** One suite, run against every implementation of the Vectorize-shaped interface. */
function vectorIndexSuite(name: string, make: () => { index: VectorIndex; other: VectorIndex }) {
  describe(`vector index: ${name}`, () => {
    it("upserts, queries nearest first, and replaces on upsert", async () => {
      const { index } = make();
      expect(await index.upsert(VECTORS)).toEqual({ count: 4 });
      const { matches } = await index.query(axis(0), { topK: 2 });
      expect(matches.map((m) => m.id)).toEqual(["a", "b"]);
      expect(matches[0].score).toBeCloseTo(1, 2);
      await index.upsert([{ id: "a", values: axis(3), metadata: { color: "red", size: 1 } }]);
      expect((await index.query(axis(0), { topK: 1 })).matches[0].id).toBe("b");
      expect((await index.query(axis(3), { topK: 1 })).matches[0].id).toBe("a");
    });

    it("applies metadata filters, including excluding ones, and returns metadata on request", async () => {
      const { index } = make();
      await index.upsert(VECTORS);
      const red = await index.query(axis(0), {
        topK: 10,
        filter: parseQdrantFilter({ must: [{ key: "color", match: { value: "red" } }] }),
        returnMetadata: true,
      });
      expect(red.matches.map((m) => m.id)).toEqual(["a", "c"]);
      expect(red.matches[0].metadata).toMatchObject({ color: "red", size: 1 });
      const notRed = await index.query(axis(0), {
        topK: 10,
        filter: parseOpenSearchFilter({ bool: { must_not: [{ term: { color: "red" } }] } }),
      });
      expect(notRed.matches.map((m) => m.id).sort()).toEqual(["b", "d"]);
      const range = await index.query(axis(0), {
        topK: 10,
        filter: parseQdrantFilter({ must: [{ key: "size", range: { gte: 2, lt: 4 } }] }),
      });
      expect(range.matches.map((m) => m.id).sort()).toEqual(["b", "c"]);
      const either = await index.query(axis(0), {
        topK: 10,
        filter: parseQdrantFilter({
          should: [
            { key: "color", match: { value: "green" } },
            { key: "size", range: { lt: 2 } },
          ],
        }),
      });
      expect(either.matches.map((m) => m.id).sort()).toEqual(["a", "d"]);
      const none = await index.query(axis(0), {
        topK: 10,
        filter: parseQdrantFilter({ must: [{ key: "color", match: { value: "violet" } }] }),
      });
      expect(none.matches).toEqual([]);
    });

    it("gets and deletes by ids", async () => {
      const { index } = make();
      await index.upsert(VECTORS);
      const got = await index.getByIds(["c", "zzz"]);
      expect(got).toHaveLength(1);
      expect(got[0].id).toBe("c");
      got[0].values.forEach((v, i) => expect(v).toBeCloseTo(axis(1)[i], 1));
      expect(await index.deleteByIds(["a", "zzz"])).toEqual({ count: 1 });
      expect((await index.query(axis(0), { topK: 10 })).matches.map((m) => m.id)).not.toContain("a");
      expect(await index.getByIds(["a"])).toEqual([]);
    });

    it("finds the nearest neighbours of a query among thousands of vectors", async () => {
      const { index } = make();
      let seed = 11;
      const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32 - 0.5;
      const unit = (v: number[]) => {
        const norm = Math.hypot(...v);
        return v.map((x) => x / norm);
      };
      const many = Array.from({ length: 3000 }, (_, i) => ({
        id: `v${i}`,
        values: unit(Array.from({ length: 64 }, rand)),
        metadata: { even: i % 2 === 0, rare: i % 100 === 34 },
      }));
      await index.upsert(many);
      const query = unit(many[1234].values.map((x) => x + rand() * 0.05));
      const dot = (v: number[]) => v.reduce((s, x, j) => s + x * query[j], 0);
      const exact = [...many]
        .sort((a, b) => dot(b.values) - dot(a.values))
        .slice(0, 10)
        .map((v) => v.id);
      const { matches } = await index.query(query, { topK: 10 });
      expect(matches[0].id).toBe("v1234");
      expect(matches.filter((m) => exact.includes(m.id)).length).toBeGreaterThanOrEqual(9);
      // With a filter that admits half the set, only admitted vectors come back, nearest first.
      const odd = await index.query(query, {
        topK: 10,
        filter: parseQdrantFilter({ must: [{ key: "even", match: { value: false } }] }),
      });
      const exactOdd = [...many]
        .filter((_, i) => i % 2 === 1)
        .sort((a, b) => dot(b.values) - dot(a.values))
        .slice(0, 10)
        .map((v) => v.id);
      expect(odd.matches).toHaveLength(10);
      expect(odd.matches.every((m) => Number(m.id.slice(1)) % 2 === 1)).toBe(true);
      expect(odd.matches.filter((m) => exactOdd.includes(m.id)).length).toBeGreaterThanOrEqual(9);
      // A filter that admits a few: every admitted vector is scored, nearest first.
      const rare = await index.query(query, {
        topK: 50,
        filter: parseQdrantFilter({ must: [{ key: "rare", match: { value: true } }] }),
      });
      const exactRare = many
        .filter((_, i) => i % 100 === 34)
        .sort((a, b) => dot(b.values) - dot(a.values))
        .map((v) => v.id);
      expect(rare.matches.map((m) => m.id).sort()).toEqual([...exactRare].sort());
      expect(rare.matches[0].id).toBe("v1234");
      expect(rare.matches.every((m, i) => i === 0 || m.score <= rare.matches[i - 1].score)).toBe(true);
    });

    it("keeps one namespace per knowledge base", async () => {
      const { index, other } = make();
      await index.upsert(VECTORS);
      await other.upsert([{ id: "other-1", values: axis(0), metadata: { color: "red" } }]);
      expect((await index.query(axis(0), { topK: 10 })).matches.map((m) => m.id)).not.toContain("other-1");
      expect((await other.query(axis(0), { topK: 10 })).matches.map((m) => m.id)).toEqual(["other-1"]);
      expect(await other.deleteByIds(["a"])).toEqual({ count: 0 });
      expect(await index.getByIds(["a"])).toHaveLength(1);
    });
  });
}

vectorIndexSuite("Loom's own (Durable Object)", () => ({
  index: new InObjectVectorIndex(env.KB_INDEX.get(env.KB_INDEX.idFromName(`suite-${crypto.randomUUID()}`))),
  other: new InObjectVectorIndex(env.KB_INDEX.get(env.KB_INDEX.idFromName(`suite-${crypto.randomUUID()}`))),
}));

vectorIndexSuite("Vectorize adapter (fake binding)", () => {
  const binding = new FakeVectorize();
  return { index: new VectorizeVectorIndex(binding, "kb-one"), other: new VectorizeVectorIndex(binding, "kb-two") };
});
