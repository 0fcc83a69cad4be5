import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { runtimeAsset } from "../../src/lib/runtime-assets";
import { STATIC_TABLE_ASSET } from "../../src/providers/generated/static-use-asset";
import { parseStaticTable, StaticEmbeddingModel } from "../../src/providers/static-embedder-core";

// The table the Worker reads: the static asset, through the ASSETS binding.
const tableBytes = await runtimeAsset(env, STATIC_TABLE_ASSET);
const table = parseStaticTable(tableBytes);
const model = new StaticEmbeddingModel(table);
const pieces = (text: string): string[] => model.tokenize(text).map((id) => table.pieces[id]);

describe("static embedding table", () => {
  it("holds the encoder's 8,000-piece vocabulary at 256 dimensions", () => {
    expect(table.vocabSize).toBe(8000);
    expect(table.dimensions).toBe(256);
    expect(table.vectors.length).toBe(8000 * 256);
    expect(table.pieces[9]).toBe("\u2581the");
  });

  it("refuses a buffer that is not a table", () => {
    expect(() => parseStaticTable(new Uint8Array(10))).toThrow("truncated");
    expect(() => parseStaticTable(new TextEncoder().encode("NOTATABLE-and-some-more-bytes-here"))).toThrow(
      "unknown format",
    );
    const cut = new Uint8Array(tableBytes).slice(0, tableBytes.byteLength - 1);
    expect(() => parseStaticTable(cut)).toThrow("does not match");
  });
});

describe("segmentation", () => {
  it("splits words into the vocabulary's pieces, word-initial pieces first", () => {
    expect(pieces("aircraft wing lift")).toEqual(["\u2581aircraft", "\u2581wing", "\u2581lift"]);
    expect(pieces("airplane").join("")).toBe("\u2581airplane");
  });

  it("sets punctuation apart so words keep their word-initial piece", () => {
    expect(pieces("(lift)")).toEqual(["\u2581(", "\u2581lift", "\u2581)"]);
  });

  it("reads a capitalised word in lower case when that needs fewer pieces", () => {
    expect(pieces("Lift")).toEqual(["\u2581lift"]);
    expect(pieces("The")).toEqual(["\u2581The"]);
  });

  it("drops characters the vocabulary does not know and control characters", () => {
    expect(pieces("\u0000\u0007")).toEqual([]);
    expect(pieces("wing \u{1F680}")).toContain("\u2581wing");
  });
});

describe("pooling", () => {
  it("pools each distinct piece once with its summed weight: the same vector as adding every occurrence", () => {
    // The per-occurrence sum the embedder computed before issue 14's fifth round, as the reference.
    const weights = (model as unknown as { weights: Float32Array }).weights;
    const reference = (text: string): Float32Array => {
      const sum = new Float32Array(table.dimensions);
      for (const id of model.tokenize(text)) {
        const weight = weights[id] * table.scales[id];
        for (let d = 0; d < table.dimensions; d++) sum[d] += weight * table.vectors[id * table.dimensions + d];
      }
      const norm = Math.sqrt(sum.reduce((n, x) => n + x * x, 0));
      return norm === 0 ? sum : sum.map((x) => x / norm);
    };
    for (const text of [
      "The the THE of of lift lift drag: the boundary layer of the wing, the wing's boundary layer.",
      "Supersonic flow past a cone at an angle of attack, flow past a cone.",
      "",
      "\u0000",
    ]) {
      const got = model.embed(text);
      const want = reference(text);
      expect(got).toHaveLength(table.dimensions);
      for (let d = 0; d < table.dimensions; d++)
        expect(Math.abs(got[d] - want[d]), `${text} [${d}]`).toBeLessThan(1e-6);
    }
  });
});
