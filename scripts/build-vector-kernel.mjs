// Build step for the knowledge-base vector scan (`npm run build:kernel`; part of `npm run build`,
// which `npm install`, `npm test` and `npm start` run first). Offline and deterministic:
// compiles src/features/knowledge-bases/index/kernels/int8-dot.wat (WebAssembly text, SIMD) to a .wasm
// the Worker imports as a compiled module (Workers may not compile wasm from bytes at run time).
import binaryen from "binaryen";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const dir = new URL("../src/features/knowledge-bases/index/kernels/", import.meta.url);
const module = binaryen.parseText(readFileSync(new URL("int8-dot.wat", dir), "utf8"));
module.setFeatures(binaryen.Features.MVP | binaryen.Features.SIMD128);
if (!module.validate()) throw new Error("int8-dot.wat does not validate");
binaryen.setOptimizeLevel(3);
module.optimize();
mkdirSync(new URL("generated/", dir), { recursive: true });
writeFileSync(new URL("generated/int8-dot.wasm", dir), module.emitBinary());
module.dispose();
