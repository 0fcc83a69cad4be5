import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { CORPUS, createKb, indexText, query } from "./kb-fixtures";
import { queryTermCounts } from "../../src/features/knowledge-bases/index/keyword-query";
import { weightedFusion } from "../../src/features/knowledge-bases/index/hybrid-search";
import { boostTitles, leadingTitle, TITLE_BOOST } from "../../src/features/knowledge-bases/index/title-boost";
import { rocchio } from "../../src/features/knowledge-bases/index/vector-feedback";

/** The query-side methods issue 14 added for retrieval quality (BENCHMARKS.md, "Loom beside LanceDB"). */
describe("hybrid fusion over standardised scores", () => {
  it("mixes each list's z-scores, so a flat list's small gaps do not outweigh a clear keyword lead", () => {
    // The keyword list ranks b well above c; the vector list barely prefers c (0.51 vs 0.50).
    const keyword = [
      { id: "b", score: 12 },
      { id: "c", score: 4 },
      { id: "d", score: 3 },
      { id: "e", score: 1 },
    ];
    const vector = [
      { id: "c", score: 0.51 },
      { id: "b", score: 0.5 },
      { id: "d", score: 0.2 },
      { id: "e", score: 0.1 },
    ];
    const fused = weightedFusion(vector, keyword, 0.2);
    expect(fused.map((s) => s.id).slice(0, 2)).toEqual(["b", "c"]);
    // z of b: keyword (12 - 5) / sd, vector (0.5 - 0.3275) / sd; the mix is left unscaled (not squeezed into [0, 1]).
    const z = (xs: number[], x: number): number => {
      const mean = xs.reduce((a, v) => a + v, 0) / xs.length;
      return (x - mean) / Math.sqrt(xs.reduce((a, v) => a + (v - mean) ** 2, 0) / xs.length);
    };
    // The keyword list is BM25: standardised over a head of 100 where the chunks it lacks score 0.
    const keywordHead = [12, 4, 3, 1, ...Array<number>(96).fill(0)];
    const expected = 0.2 * z([0.51, 0.5, 0.2, 0.1], 0.5) + 0.8 * z(keywordHead, 12);
    expect(fused[0].score).toBeCloseTo(expected, 9);
    expect(fused[0].score).toBeGreaterThan(1);
  });

  it("gives an item missing from the vector list that list's lowest score, and one missing from the keyword list BM25's 0", () => {
    const fused = weightedFusion(
      [
        { id: "v", score: 0.9 },
        { id: "k", score: 0.1 },
      ],
      [
        { id: "k", score: 5 },
        { id: "only-k", score: 1 },
      ],
      0.5,
    );
    const score = new Map(fused.map((s) => [s.id, s.score]));
    const z = (xs: number[], x: number): number => {
      const mean = xs.reduce((a, v) => a + v, 0) / xs.length;
      return (x - mean) / Math.sqrt(xs.reduce((a, v) => a + (v - mean) ** 2, 0) / xs.length);
    };
    const keywordHead = [5, 1, ...Array<number>(98).fill(0)];
    // "v" is missing from the keyword list: it scores 0 there; "only-k" is missing from the vector list: its lowest z (-1).
    expect(score.get("v")).toBeCloseTo(0.5 * 1 + 0.5 * z(keywordHead, 0), 9);
    expect(score.get("only-k")).toBeCloseTo(0.5 * -1 + 0.5 * z(keywordHead, 1), 9);
    const flat = weightedFusion(
      [
        { id: "a", score: 0.3 },
        { id: "b", score: 0.3 },
      ],
      [{ id: "c", score: 2 }],
      0.5,
    );
    expect(flat.every((s) => Number.isFinite(s.score))).toBe(true);
  });

  it("keeps the only chunk holding a rare query term above every vector neighbour", () => {
    // One keyword hit (a term one chunk holds) against 200 vector candidates, the hit among the weakest of them.
    const vector = Array.from({ length: 200 }, (_, i) => ({ id: `n${i}`, score: 0.9 - i * 0.004 }));
    vector.push({ id: "hit", score: 0.05 });
    const fused = weightedFusion(vector, [{ id: "hit", score: 7.5 }], 0.2);
    expect(fused[0].id).toBe("hit");
  });
});

describe("title boost (a document's first line as its title field)", () => {
  it("reads a short first line followed by a blank line, only in a document's first chunk", () => {
    expect(leadingTitle("Flutter of thin panels\n\nThe panels were tested.", 0)).toBe("Flutter of thin panels");
    expect(leadingTitle("# Setup guide\r\n\r\nInstall it.", 0)).toBe("Setup guide");
    expect(leadingTitle("Flutter of thin panels\n\nThe panels were tested.", 1)).toBeUndefined();
    expect(leadingTitle("One paragraph with no title line at all.", 0)).toBeUndefined();
    expect(leadingTitle("Line one\nline two\n\nbody", 0)).toBeUndefined();
    const paragraph = Array.from({ length: TITLE_BOOST.maxWords + 1 }, (_, i) => `w${i}`).join(" ");
    expect(leadingTitle(`${paragraph}\n\nbody`, 0)).toBeUndefined();
  });

  it("lifts a hit whose title holds query terms above one that only mentions them, weighted by idf", () => {
    const hits = [
      { id: 1, score: 10 },
      { id: 2, score: 9.5 },
      { id: 3, score: 9 },
    ];
    const titles = new Map([
      [2, ["flutter", "panel"]],
      [3, ["the"]],
    ]);
    const query = new Map([
      ["flutter", 1],
      ["panel", 1],
      ["the", 1],
    ]);
    const idf = (stem: string): number => (stem === "the" ? 1e-6 : 2);
    const boosted = boostTitles(hits, (id) => titles.get(id), query, idf);
    expect(boosted.map((h) => h.id)).toEqual([2, 1, 3]);
    expect(boosted[0].score).toBeCloseTo(9.5 + TITLE_BOOST.weight * (2 + 2), 9);
    // A common word in the title changes almost nothing.
    expect(boosted[2].score).toBeCloseTo(9, 5);
  });

  it("boosts a document's first chunk by its title through the index object, and not the same words elsewhere", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await createKb(key);
    // The same words in both: the title line of one, a last line (no title) of the other, so BM25
    // scores them alike and only the title boost (which reads the first chunk's text) sets them apart.
    const titled = await indexText(key, kb, "titled.txt", "Aileron buzz\n\nWind tunnel notes on control surfaces.");
    const untitled = await indexText(key, kb, "untitled.txt", "Wind tunnel notes on control surfaces.\nAileron buzz");
    // Other documents, so the query's words are rare enough to weigh something (BM25's idf).
    for (const [name, text] of Object.entries(CORPUS)) await indexText(key, kb, `${name}.txt`, text.text);
    const { status, items } = await query(key, kb, {
      query: "aileron buzz",
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(status).toBe(200);
    expect(items.slice(0, 2).map((i) => i.document_id)).toEqual([titled, untitled]);
    expect(Number(items[0].score)).toBeGreaterThan(Number(items[1].score));
  });

  it("re-ranks only the head: the tail keeps its order below it", () => {
    const hits = Array.from({ length: TITLE_BOOST.rerank + 5 }, (_, i) => ({ id: i, score: 100 - i }));
    const lastOfTail = TITLE_BOOST.rerank + 4;
    const boosted = boostTitles(
      hits,
      (id) => (id === lastOfTail || id === 10 ? ["x"] : undefined),
      new Map([["x", 1]]),
      () => 50,
    );
    expect(boosted[0].id).toBe(10);
    expect(boosted.slice(TITLE_BOOST.rerank).map((h) => h.id)).toEqual(hits.slice(TITLE_BOOST.rerank).map((h) => h.id));
  });
});

describe("vector feedback (Rocchio)", () => {
  it("moves the query towards the feedback vectors' mean and keeps unit length", () => {
    const moved = rocchio(
      [1, 0, 0],
      [
        [0, 1, 0],
        [0, 1, 0],
      ],
      1,
    );
    expect(moved[0]).toBeCloseTo(Math.SQRT1_2, 9);
    expect(moved[1]).toBeCloseTo(Math.SQRT1_2, 9);
    expect(Math.hypot(...moved)).toBeCloseTo(1, 9);
  });

  it("keeps the query when there is no usable feedback", () => {
    expect(rocchio([0.6, 0.8], [])).toEqual([0.6, 0.8]);
    expect(rocchio([0.6, 0.8], [[1, 0, 0]])).toEqual([0.6, 0.8]);
  });
});

describe("request words (how a query is asked, not what about)", () => {
  it("leaves them out of a query's terms when it has others, and searches them when it has nothing else", () => {
    expect([...queryTermCounts("Has anyone described papers dealing with panel flutter? Please give data.")]).toEqual([
      ["panel", 1],
      ["flutter", 1],
      ["data", 1],
    ]);
    expect([...queryTermCounts("Any papers available?")]).toEqual([
      ["papers", 1],
      ["available", 1],
    ]);
    expect([...queryTermCounts("what is it")].map(([t]) => t)).toEqual(["what", "is", "it"]);
    // A contraction's fragment is no term; the same letter standing alone is one.
    expect([...queryTermCounts("I'd like the user’s view of vitamin D, e.g. vitamin E")].map(([t]) => t)).toEqual([
      "like",
      "user",
      "view",
      "vitamin",
      "d",
      "e",
    ]);
  });

  it("ranks the chunk about the query's subject above one that only repeats its phrasing, through the Worker", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(
      key,
      kb,
      "flutter.txt",
      "Panel flutter\n\nFlutter of thin panels was measured at supersonic speed.",
    );
    await indexText(
      key,
      kb,
      "library.txt",
      "Library notice\n\nAnyone wanting papers described in the catalogue may ask: papers are available to anybody who wishes, please ask.",
    );
    await indexText(key, kb, "wings.txt", "Wing loads\n\nLoads on swept wings in transonic flow.");
    for (const mode of ["keyword", "hybrid"]) {
      const found = await query(key, kb, {
        queries: ["Has anyone described papers available on panel flutter? Please."],
        config: { retrieval_config: { search_mode: mode }, retrieval_unit: "documents" },
      });
      expect(found.status, mode).toBe(200);
      expect(String(found.items[0]?.text), mode).toContain("Flutter of thin panels");
    }
  });
});
