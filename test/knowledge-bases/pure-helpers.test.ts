import { describe, expect, it } from "vitest";
import { chunkText, countTokens } from "../../src/features/knowledge-bases/chunker";
import { VectorArena } from "../../src/features/knowledge-bases/index/vector-arena";
import {
  maxFusion,
  reciprocalRankFusion,
  weightedFusion,
} from "../../src/features/knowledge-bases/index/hybrid-search";
import {
  MAX_SCORED_TERMS,
  matchExpression,
  queryTermCounts,
  queryTerms,
  selectTerms,
} from "../../src/features/knowledge-bases/index/keyword-query";
import { expandWithFeedback, feedbackWords } from "../../src/features/knowledge-bases/index/keyword-feedback";
import { chunkDocument, withDocumentId } from "../../src/features/knowledge-bases/ingestion.service";

describe("chunker", () => {
  const text = Array.from({ length: 30 }, (_, i) => `This is sentence ${i} of the text.`).join(" ");

  it("keeps chunks within chunk_size tokens and ends them at sentence bounds", () => {
    const chunks = chunkText(text, { chunkSize: 40, chunkOverlap: 0 });
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(countTokens(c.text)).toBeLessThanOrEqual(40);
      expect(c.text.endsWith(".")).toBe(true);
      expect(c.text.startsWith("This")).toBe(true);
    }
    expect(chunks.map((c) => c.text).join(" ")).toBe(text);
  });

  it("repeats chunk_overlap tokens between consecutive chunks", () => {
    const chunks = chunkText(text, { chunkSize: 40, chunkOverlap: 10 });
    const plain = chunkText(text, { chunkSize: 40, chunkOverlap: 0 });
    expect(chunks.length).toBeGreaterThan(plain.length);
    expect(chunks[1].text.startsWith("This is sentence")).toBe(false);
  });

  it("starts a new chunk at each Markdown heading and records the section", () => {
    const md = "# Intro\n\nShort intro.\n\n## Install\n\nRun the installer.\n\n## Use\n\nOpen the app.";
    const chunks = chunkText(md, { chunkSize: 400, chunkOverlap: 0 });
    expect(chunks.map((c) => c.section)).toEqual(["Intro", "Install", "Use"]);
    expect(chunks[1].text).toBe("## Install\n\nRun the installer.");
  });

  it("cuts a sentence longer than a chunk at the token limit, and gives nothing for empty text", () => {
    const long = Array.from({ length: 100 }, (_, i) => `word${i}`).join(" ");
    const chunks = chunkText(long, { chunkSize: 30, chunkOverlap: 5 });
    expect(chunks.every((c) => c.tokenCount <= 30)).toBe(true);
    expect(chunks[chunks.length - 1].text.endsWith("word99")).toBe(true);
    expect(chunkText("   \n ", { chunkSize: 30, chunkOverlap: 0 })).toEqual([]);
  });
});

describe("vector arena (SIMD int8 scan)", () => {
  let seed = 7;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32 - 0.5;
  const randomRow = (dims: number) => Int8Array.from({ length: dims }, () => Math.round(rand() * 254));

  for (const dims of [256, 300, 3]) {
    it(`gives the exact int32 dot product of every row (${dims} dimensions), across growth`, () => {
      const arena = new VectorArena(dims);
      const rows: Int8Array[] = [];
      for (let i = 0; i < 3000; i++) {
        // Grows several times on the way: rows written before a growth must survive it.
        arena.reserve(i + 1);
        rows.push(randomRow(dims));
        arena.setRow(i, rows[i]);
      }
      const query = randomRow(dims);
      const scores = Array.from(arena.dotAll(query, rows.length));
      const expected = rows.map((row) => row.reduce((s, v, j) => s + v * query[j], 0));
      expect(scores).toEqual(expected);
      expect(Array.from(arena.row(1234))).toEqual(Array.from(rows[1234]));
    });
  }

  it("gives the same products for listed slots as for every row: lists of 0 to 41 slots, in any order, with repeats", () => {
    // dot_list reads eight rows at a time, then the rest one by one: every length around those groups.
    for (const dims of [256, 40]) {
      const arena = new VectorArena(dims);
      const count = 500;
      arena.reserve(count);
      for (let i = 0; i < count; i++) arena.setRow(i, randomRow(dims));
      const query = randomRow(dims);
      const all = Array.from(arena.dotAll(query, count));
      for (let length = 0; length <= 41; length++) {
        const slots = Int32Array.from({ length }, () => Math.floor((rand() + 0.5) * count));
        // Every fifth slot repeats an earlier one.
        for (let i = 4; i < length; i += 5) slots[i] = slots[Math.floor((rand() + 0.5) * i)];
        expect(Array.from(arena.dotSome(query, slots)), `${length} slots, ${dims} dimensions`).toEqual(
          Array.from(slots, (slot) => all[slot]),
        );
      }
    }
  });

  it("moves a row and reads rows written in bulk", () => {
    const arena = new VectorArena(40);
    arena.reserve(10);
    const bulk = new Int8Array(40 * 3).map((_, i) => (i % 50) - 25);
    arena.setRows(2, bulk, 3);
    expect(Array.from(arena.row(3))).toEqual(Array.from(bulk.subarray(40, 80)));
    arena.copyRow(4, 0);
    expect(Array.from(arena.row(0))).toEqual(Array.from(bulk.subarray(80, 120)));
    expect(() => new VectorArena(0)).toThrow();
  });
});

describe("fusion and keyword terms", () => {
  const a = [
    { id: "x", score: 9 },
    { id: "y", score: 5 },
  ];
  const b = [
    { id: "y", score: 0.9 },
    { id: "z", score: 0.1 },
  ];
  it("fuses by reciprocal rank, by weight and by max", () => {
    expect(reciprocalRankFusion([a, b])[0].id).toBe("y");
    expect(weightedFusion(a, b, 1).map((s) => s.id)[0]).toBe("x");
    expect(weightedFusion(a, b, 0).map((s) => s.id)[0]).toBe("y");
    expect(maxFusion([a, b]).map((s) => s.id)).toEqual(["x", "y", "z"]);
  });
  it("quotes every term and keeps the rarest when there are many", () => {
    expect(queryTerms('What is "NEAR" AND the flow?')).toEqual(["near", "flow"]);
    expect(matchExpression(['a"b', "c"])).toBe('"a""b" OR "c"');
    const many = Array.from({ length: MAX_SCORED_TERMS + 8 }, (_, i) => `t${i}`);
    expect(selectTerms(many, (t) => Number(t.slice(1)) + 1)).toEqual(many.slice(0, MAX_SCORED_TERMS));
  });
  it("counts how often a long query says each content word", () => {
    expect([
      ...queryTermCounts("What problems are there in making titles? How relevant are titles to articles?"),
    ]).toEqual([
      ["problems", 1],
      ["making", 1],
      ["titles", 2],
      ["relevant", 1],
      ["articles", 1],
    ]);
    expect([...queryTermCounts("what is it")]).toEqual([
      ["what", 1],
      ["is", 1],
      ["it", 1],
    ]);
  });
  it("mixes the feedback chunks' shared rare terms into the query (RM3)", () => {
    expect([...feedbackWords("The Wing and the wings of 12 jets")]).toEqual([
      ["wing", 1],
      ["wings", 1],
      ["jets", 1],
    ]);
    const query = new Map([["flutter", 1]]);
    const docs = [
      {
        stems: new Map([
          ["flutter", 2],
          ["wing", 3],
          ["the", 5],
        ]),
        score: 3,
      },
      {
        stems: new Map([
          ["wing", 1],
          ["panel", 1],
          ["the", 5],
        ]),
        score: 1,
      },
    ];
    const common = new Set(["the"]);
    const mixed = expandWithFeedback(query, docs, (s) => (common.has(s) ? 0 : 1));
    expect(mixed.get("flutter")).toBeGreaterThan(mixed.get("wing") ?? 0);
    expect(mixed.get("wing")).toBeGreaterThan(mixed.get("panel") ?? 0);
    expect(mixed.has("the")).toBe(false);
    expect([...mixed.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    expect(expandWithFeedback(query, [], () => 1)).toBe(query);
  });
});

describe("chunks relabelled with their document id (the index route chunks each file once)", () => {
  it("gives exactly what chunking under the real id gives: ids, positions, texts and metadata", () => {
    const text = Array.from({ length: 40 }, (_, i) => `Sentence ${i} about lift and drag.`).join(" ");
    const doc = {
      name: "a.txt",
      path: "docs/a.txt",
      mimeType: "text/plain",
      source: "file",
      size: text.length,
      customMetadata: { topic: "aero", document_id: "spoofed" },
      extraMetadata: {},
      pages: [text, "Second page."],
    };
    const settings = { chunkSize: 30, chunkOverlap: 5 };
    const placeholder = chunkDocument("x", doc, settings);
    const real = chunkDocument("doc_123", doc, settings);
    expect(placeholder.length).toBeGreaterThan(3);
    const relabelled = withDocumentId(placeholder, "doc_123");
    expect(relabelled).toEqual(real);
    // Key order too: the metadata is stored as JSON text.
    expect(relabelled.map((c) => JSON.stringify(c.metadata))).toEqual(real.map((c) => JSON.stringify(c.metadata)));
    expect(placeholder[0].documentId).toBe("x");
  });
});
