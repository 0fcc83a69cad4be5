import { describe, expect, it } from "vitest";
import { listBound, StemTopK, type StemPostings } from "../../src/features/knowledge-bases/index/keyword-topk";

/** A small seeded generator (mulberry32), so a failing case can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case {
  lists: StemPostings[];
  norm: Float64Array;
  allowed: Set<number> | undefined;
  topK: number;
  head: number;
}

/**
 * A random corpus and query: BM25's length term as chunk-lengths.ts computes it (-1 for rows with
 * no stored length), lists with rows past the length table, term counts and lengths drawn from few
 * values (so many rows tie to the bit), weights like a plain query's (counts) or a feedback
 * query's (fractions), sometimes an allowed set, and a top k and head of any size.
 */
function randomCase(seed: number): Case {
  const r = random(seed);
  const pick = (n: number): number => Math.floor(r() * n);
  const rows = 1 + pick(r() < 0.3 ? 40 : 3000);
  // Flat: one length, tf 1, lists of one size and one weight, so rows met by as many stems tie to the bit.
  const flat = r() < 0.25;
  const lengthValues = flat ? [48] : r() < 0.5 ? [12, 48] : [1, 5, 20, 48, 49, 200, 1000];
  const lengths = Array.from({ length: rows }, () => (r() < 0.05 ? 0 : lengthValues[pick(lengthValues.length)] + 1));
  const count = lengths.filter((l) => l > 0).length || 1;
  const total = lengths.reduce((a, l) => a + (l > 0 ? l - 1 : 0), 0);
  const avgdl = total / count || 1;
  const norm = Float64Array.from(lengths, (l) => (l === 0 ? -1 : 1.2 * (1 - 0.6 + (0.6 * (l - 1)) / avgdl)));
  const stems = 1 + pick(r() < 0.5 ? 6 : 40);
  const sharedWeight = 1 + pick(3);
  const lists: StemPostings[] = [];
  for (let s = 0; s < stems; s++) {
    const density = flat ? 0.2 : [0.001, 0.01, 0.05, 0.3, 0.9][pick(5)];
    const ids: number[] = [];
    for (let id = 1; id < rows + 20; id++) if (r() < density) ids.push(id);
    const tfValues = flat || r() < 0.5 ? [1] : [1, 1, 1, 2, 3, 7, 300];
    const tfs = Uint16Array.from(ids, () => tfValues[pick(tfValues.length)]);
    const df = flat ? Math.ceil(rows / 5) : Math.max(ids.length, 1);
    const idf = Math.max(Math.log((count - df + 0.5) / (df + 0.5)), 1e-6);
    const weight = flat || r() < 0.3 ? sharedWeight : r() < 0.5 ? 1 + pick(4) : r() * 0.2;
    const list = { rows: Int32Array.from(ids), tfs };
    lists.push({ ...list, w: idf * weight * 2.2, frac: listBound(list.rows, list.tfs, norm) });
  }
  let allowed: Set<number> | undefined;
  if (r() < 0.3) {
    allowed = new Set<number>();
    for (let id = 0; id < rows + 20; id++) if (r() < 0.4) allowed.add(id);
  }
  const topK = 1 + pick(r() < 0.5 ? 10 : 120);
  const head = r() < 0.5 ? topK : 1 + pick(topK);
  return { lists, norm, allowed, topK, head };
}

describe("BM25 top k with pruning", () => {
  it("answers exactly what the full pass answers (rows, scores to the bit, ties) on 3,000 random corpora and queries", () => {
    const pruned = new StemTopK();
    const full = new StemTopK();
    let savedWork = 0;
    let headsAsked = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const c = randomCase(seed);
      const expected = full.exhaustive(c.lists, c.norm, c.allowed, c.topK).slice(0, c.head);
      const got = pruned.top(c.lists, c.norm, c.allowed, c.topK, c.head);
      if (
        got.length !== expected.length ||
        got.some((g, i) => g.rowid !== expected[i].rowid || !Object.is(g.score, expected[i].score))
      )
        expect({ seed, got }).toEqual({ seed, got: expected });
      if (pruned.walked < full.walked) savedWork++;
      if (c.head < c.topK) headsAsked++;
    }
    // The cases exercise the pruning itself, not only its fallback to the full pass.
    expect(savedWork).toBeGreaterThan(500);
    expect(headsAsked).toBeGreaterThan(500);
  });

  it("keeps the full pass's order among rows tied at the cut (its first-met rows win, not the lowest rowids)", () => {
    // Three rows tie; the full pass meets row 9 (stem 0) before rows 2 and 5 (stem 1), so with k = 1 row 9 wins.
    const norm = new Float64Array(12).fill(1);
    const lists: StemPostings[] = [
      { rows: Int32Array.from([9]), tfs: Uint16Array.from([1]), w: 2, frac: 0 },
      { rows: Int32Array.from([2, 5]), tfs: Uint16Array.from([1, 1]), w: 2, frac: 0 },
      { rows: Int32Array.from([1, 3, 4, 6, 7, 8, 10, 11]), tfs: new Uint16Array(8).fill(1), w: 0.01, frac: 0 },
    ];
    for (const l of lists) l.frac = listBound(l.rows, l.tfs, norm);
    const full = new StemTopK().exhaustive(lists, norm, undefined, 1);
    expect(full).toEqual([{ rowid: 9, score: 1 }]);
    expect(new StemTopK().top(lists, norm, undefined, 1)).toEqual(full);
  });

  it("ranks rows whose scores differ below float32's precision exactly as the full pass (its running sums are float32)", () => {
    // Lengths that differ by parts in 1e8 to 1e12: float32 partial sums cannot order these rows,
    // float64 can, and every cut of the top k must still fall where the exact pass puts it.
    for (let seed = 1; seed <= 400; seed++) {
      const r = random(seed);
      const rows = 50 + Math.floor(r() * 400);
      const spread = [1e-12, 1e-10, 1e-8][seed % 3];
      const norm = Float64Array.from({ length: rows + 1 }, (_, id) => (id === 0 ? -1 : 0.9 * (1 + r() * spread)));
      const lists: StemPostings[] = [];
      for (let s = 2 + Math.floor(r() * 20); s > 0; s--) {
        const ids = Array.from({ length: rows }, (_, i) => i + 1).filter(() => r() < 0.6);
        const list = { rows: Int32Array.from(ids), tfs: new Uint16Array(ids.length).fill(1) };
        lists.push({ ...list, w: 1.3 + Math.floor(r() * 3) * 0.1, frac: listBound(list.rows, list.tfs, norm) });
      }
      const topK = 1 + Math.floor(r() * 60);
      const head = r() < 0.5 ? topK : 1 + Math.floor(r() * topK);
      const expected = new StemTopK().exhaustive(lists, norm, undefined, topK).slice(0, head);
      const got = new StemTopK().top(lists, norm, undefined, topK, head);
      if (JSON.stringify(got) !== JSON.stringify(expected)) expect({ seed, got }).toEqual({ seed, got: expected });
    }
  });

  it("takes the full pass for lists it cannot search by rowid (out of order, a zero term count)", () => {
    const norm = new Float64Array(8).fill(1);
    expect(listBound(Int32Array.from([3, 2]), Uint16Array.from([1, 1]), norm)).toBeNaN();
    expect(listBound(Int32Array.from([2, 3]), Uint16Array.from([1, 0]), norm)).toBeNaN();
    expect(listBound(Int32Array.from([2, 3, 9]), Uint16Array.from([1, 3, 1]), norm)).toBe(3 / 4);
  });
});
