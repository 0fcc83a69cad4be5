// `npm run bench:kernel`: times the knowledge-base vector scan kernel (the SIMD int8 dot product
// in src/features/knowledge-bases/index/kernels/int8-dot.wat, as `npm run build` compiles it) against the
// same scan in plain JavaScript, in Node 22 (V8, as in workerd). Offline; prints ms per full scan.
// Options: --count=100000 --dims=256 --runs=50
import { readFileSync } from "node:fs";

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=")));
const count = Number(args.get("count") ?? 100_000);
const dims = Number(args.get("dims") ?? 256);
const runs = Number(args.get("runs") ?? 50);
const stride = Math.ceil(dims / 32) * 32;

const bytes = readFileSync(
  new URL("../src/features/knowledge-bases/index/kernels/generated/int8-dot.wasm", import.meta.url),
);
const { memory, dot_all } = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports;
const PAGE = 65_536;
const dataOffset = PAGE;
const outOffset = dataOffset + count * stride;
memory.grow(Math.ceil((outOffset + count * 4) / PAGE));
const heap = new Int8Array(memory.buffer);
let seed = 1;
const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
for (let i = 0; i < count; i++)
  for (let j = 0; j < dims; j++) heap[dataOffset + i * stride + j] = Math.round(rand() * 254 - 127);
for (let j = 0; j < dims; j++) heap[j] = Math.round(rand() * 254 - 127);
const out = new Int32Array(memory.buffer, outOffset, count);

const time = (fn) => {
  fn();
  const t0 = performance.now();
  for (let r = 0; r < runs; r++) fn();
  return (performance.now() - t0) / runs;
};
const simd = time(() => dot_all(dataOffset, count, stride, 0, outOffset));
// Same result, checked on a few rows, and the same scan in JavaScript (float query, int8 rows).
for (const i of [0, count >> 1, count - 1]) {
  let s = 0;
  for (let j = 0; j < dims; j++) s += heap[dataOffset + i * stride + j] * heap[j];
  if (s !== out[i]) throw new Error(`kernel disagrees with JavaScript at row ${i}: ${out[i]} vs ${s}`);
}
const query = Float32Array.from({ length: dims }, () => rand() - 0.5);
const scores = new Float32Array(count);
const js = time(() => {
  for (let i = 0; i < count; i++) {
    const off = dataOffset + i * stride;
    let s = 0;
    for (let j = 0; j < dims; j++) s += query[j] * heap[off + j];
    scores[i] = s;
  }
});
console.log(
  `${count} x ${dims} int8 vectors, one full scan: SIMD kernel ${simd.toFixed(2)} ms, plain JavaScript ${js.toFixed(2)} ms (${(js / simd).toFixed(1)}x), ${runs} runs each`,
);
