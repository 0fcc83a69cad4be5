/**
 * Recall of the compact first pass of the vector search (vector-codes.ts): the final vector top-k
 * of nearestIn() with sign-code candidates against the exact int8 scan, on the bench corpus at
 * 100k chunks (the text `npm run bench -- scale` indexes: Cranfield words in their corpus
 * frequencies, 40-word chunks, Cranfield's 225 queries) and on Cranfield and CISI cut into
 * 48-word chunks with the threshold forced to 0. Also times both passes (Node, V8 as workerd).
 * Run: `npm run eval:vector-recall` (eval-vector-recall.mjs bundles this file and the TypeScript it
 * imports with esbuild, then runs it).
 * Options (env): CHUNKS=100000.
 */
import { readFileSync } from "node:fs";
import { parseStaticTable, StaticEmbeddingModel } from "../src/providers/static-embedder-core";
import { VectorArena } from "../src/features/knowledge-bases/index/vector-arena";
import { SignCodes } from "../src/features/knowledge-bases/index/vector-codes";
import { quantize } from "../src/features/knowledge-bases/index/vector-index";
import { APPROXIMATE, nearestIn, SlotIndex } from "../src/features/knowledge-bases/index/vector-scan";
import { syntheticCranfield } from "./bench-corpus.mjs";
import { loadCisi } from "./collections.mjs";
import { loadCranfield } from "./cranfield.mjs";

const model = new StaticEmbeddingModel(parseStaticTable(readFileSync("src/providers/generated/static-use.bin")));
const embed = (text) => Float32Array.from(model.embed(text));

/** A ScanSource (vector-scan.ts) over an arena and its codes, as a loaded VectorStore builds it. */
function source(vectors) {
  const dims = vectors[0].length;
  const count = vectors.length;
  const arena = new VectorArena(dims);
  const codes = new SignCodes(dims);
  arena.reserve(count);
  codes.reserve(count);
  const rowids = new Int32Array(count);
  const scales = new Float32Array(count);
  const slotOf = new SlotIndex();
  const q8 = new Int8Array(dims);
  vectors.forEach((v, slot) => {
    scales[slot] = quantize(v, q8, 0);
    arena.setRow(slot, q8);
    codes.setRows(slot, q8, 1, scales, slot);
    rowids[slot] = slot + 1;
  });
  slotOf.fill(rowids, count);
  return {
    dims,
    count,
    rowids,
    scales,
    slotOf,
    codes,
    dotAll: (q) => arena.dotAll(q, count),
    dotSome: (q, slots) => arena.dotSome(q, slots),
    dot: (slot, q) => arena.dot(slot, q),
  };
}

const words = (text) => text.split(/\s+/).filter(Boolean);
function chunked(texts, size) {
  const out = [];
  for (const t of texts) {
    const w = words(t);
    for (let i = 0; i < w.length; i += size) out.push(w.slice(i, i + size).join(" "));
  }
  return out;
}

const EXACT = { ...APPROXIMATE, from: Number.POSITIVE_INFINITY };
function measure(name, texts, queries, settings, ks) {
  const src = source(texts.map(embed));
  const qs = queries.map(embed);
  console.log(`\n${name}: ${src.count} vectors, ${qs.length} queries`);
  for (const k of ks) {
    const exact = qs.map((q) => nearestIn(src, q, k, undefined, EXACT).map((r) => r.rowid));
    for (const s of settings) {
      let hit = 0;
      let all = 0;
      let worst = 1;
      for (const [i, q] of qs.entries()) {
        const got = new Set(nearestIn(src, q, k, undefined, s).map((r) => r.rowid));
        const h = exact[i].filter((r) => got.has(r)).length;
        hit += h;
        all += exact[i].length;
        worst = Math.min(worst, h / exact[i].length);
      }
      const pool = k * 2 + 64;
      console.log(
        `  top ${k} (pool ${pool}), ${s.perPool} x pool, min ${s.min} = ${Math.max(pool * s.perPool, s.min)} candidates: recall ${(hit / all).toFixed(4)}, worst query ${worst.toFixed(2)}`,
      );
    }
  }
  const time = (s) => {
    for (const q of qs.slice(0, 20)) nearestIn(src, q, 50, undefined, s);
    // CPU time, not wall time: the machine is shared.
    const t0 = process.cpuUsage();
    for (let r = 0; r < 3; r++) for (const q of qs) nearestIn(src, q, 50, undefined, s);
    const used = process.cpuUsage(t0);
    return (used.user + used.system) / 1000 / (3 * qs.length);
  };
  const timed = [EXACT, ...settings, EXACT].map(
    (s) => `${s.from > src.count ? "exact" : `${s.perPool} x pool`} ${time(s).toFixed(3)}`,
  );
  console.log(`  nearest top 50, ms a query (Node): ${timed.join(", ")}`);
}

const perPool = (from, min) => [8, 16, 24].map((p) => ({ from, perPool: p, min }));
const { queries, makeDocument } = syntheticCranfield();
const n = Number(process.env.CHUNKS ?? 100_000);
const bench = Array.from({ length: n }, () => makeDocument(1));
if (process.env.ONLY_BENCH) {
  measure("bench corpus", bench, queries, perPool(0, 1_024), [10, 50, 200]);
  process.exit(0);
}
measure("bench corpus", bench, queries, perPool(0, 1_024), [10, 50]);
const dataDir = "../shared/data";
for (const [name, load, dir] of [
  ["Cranfield, 48-word chunks", loadCranfield, "cranfield"],
  ["CISI, 48-word chunks", loadCisi, "cisi"],
]) {
  const c = load(`${dataDir}/${dir}`);
  measure(
    name,
    chunked(
      c.docs.map((d) => `${d.title} ${d.body}`),
      48,
    ),
    c.queries.map((q) => q.text),
    [...perPool(0, 0), { ...APPROXIMATE, from: 0 }],
    [10, 50],
  );
}
