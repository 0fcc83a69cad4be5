import { describe, expect, it } from "vitest";
import { chunkText, countTokens } from "../../src/features/knowledge-bases/chunker";
import { nearest, signBits, EXACT_SCAN_LIMIT } from "../../src/features/knowledge-bases/vector-kernels";
import { quantize } from "../../src/features/knowledge-bases/vector-index";
import { maxFusion, reciprocalRankFusion, weightedFusion } from "../../src/features/knowledge-bases/hybrid-search";
import { matchExpression, queryTerms, selectTerms } from "../../src/features/knowledge-bases/keyword-query";

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

describe("vector kernels", () => {
  it("the sign-bit pre-ranking finds the exact nearest neighbours of a large set", () => {
    const dims = 64;
    const count = EXACT_SCAN_LIMIT * 3;
    const data = new Int8Array(count * dims);
    const scales = new Float32Array(count);
    let seed = 7;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32) - 0.5;
    const vec = new Float32Array(dims);
    for (let i = 0; i < count; i++) {
      let norm = 0;
      for (let j = 0; j < dims; j++) norm += (vec[j] = rand()) ** 2;
      for (let j = 0; j < dims; j++) vec[j] /= Math.sqrt(norm);
      scales[i] = quantize(vec, data, i * dims);
    }
    let bits: Uint32Array | undefined;
    const set = { count, dims, data, scales, bits: () => (bits ??= signBits(data, count, dims)) };
    // Queries near stored vectors: the stored vector itself must come first.
    for (const target of [3, 5000, count - 1]) {
      const q = new Float32Array(dims);
      for (let j = 0; j < dims; j++) q[j] = data[target * dims + j] * scales[target] + rand() * 0.05;
      const exact = nearest(set, q, 10, true).map((r) => r.item);
      const fast = nearest(set, q, 10).map((r) => r.item);
      expect(fast[0]).toBe(target);
      expect(fast.filter((x) => exact.includes(x)).length).toBeGreaterThanOrEqual(8);
    }
  });
});

describe("fusion and keyword terms", () => {
  const a = [{ id: "x", score: 9 }, { id: "y", score: 5 }];
  const b = [{ id: "y", score: 0.9 }, { id: "z", score: 0.1 }];
  it("fuses by reciprocal rank, by weight and by max", () => {
    expect(reciprocalRankFusion([a, b])[0].id).toBe("y");
    expect(weightedFusion(a, b, 1).map((s) => s.id)[0]).toBe("x");
    expect(weightedFusion(a, b, 0).map((s) => s.id)[0]).toBe("y");
    expect(maxFusion([a, b]).map((s) => s.id)).toEqual(["x", "y", "z"]);
  });
  it("quotes every term and keeps the rarest when there are many", () => {
    expect(queryTerms('What is "NEAR" AND the flow?')).toEqual(["near", "flow"]);
    expect(matchExpression(['a"b', "c"])).toBe('"a""b" OR "c"');
    const many = Array.from({ length: 20 }, (_, i) => `t${i}`);
    expect(selectTerms(many, (t) => Number(t.slice(1)) + 1)).toEqual(many.slice(0, 12));
  });
});
