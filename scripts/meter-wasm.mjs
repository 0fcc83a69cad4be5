// Build step for the transformation sandbox (`npm run build:sandbox`; run by `npm install`,
// `npm test` and `npm start` first). Offline, deterministic, a few seconds:
// 1. rewrites the QuickJS and MicroPython .wasm with binaryen so that every function entry
//    and every loop header spends one unit of a fuel counter and traps once it is spent;
//    the host sets the counter before each call through the exported `loom_set_fuel`.
//    Runaway code makes no call out of the wasm, so only fuel inside the wasm can stop it;
// 2. writes a copy of MicroPython's loader that accepts emscripten's `instantiateWasm` (so
//    the statically imported, already compiled module is used), has no Node-only imports,
//    and whose `js` module sees an empty object instead of the host's globals;
// 3. bundles the guest entry (what runs inside the Dynamic Worker) into one ES module
//    source string the main Worker hands to the Worker Loader.
// Outputs go to src/sandbox/generated/ (not committed).
import binaryen from "binaryen";
import { build } from "esbuild";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename } from "node:path";

const root = new URL("../", import.meta.url);
const out = new URL("src/sandbox/generated/", root);
mkdirSync(out, { recursive: true });
const read = (path) => readFileSync(new URL(path, root));

/** Inserts the fuel counter into one interpreter's wasm; returns the metered bytes. */
function meter(bytes) {
  const module = binaryen.readBinary(bytes);
  const F = binaryen.Features;
  // What emscripten emits today; "All" would also switch on encodings workerd cannot read.
  module.setFeatures(F.MVP | F.MutableGlobals | F.NontrappingFPToInt | F.SignExt | F.BulkMemory | F.BulkMemoryOpt | F.SIMD128 | F.ReferenceTypes | F.Multivalue | F.CallIndirectOverlong);
  // binaryen's log-execution pass puts a call to an imported `log_execution` at every
  // function entry, loop header and return; that import is then replaced by a defined
  // function that spends fuel, and inlined, so no call leaves the wasm.
  module.runPasses(["log-execution"]);
  let hook;
  for (let i = 0; i < module.getNumFunctions(); i++) {
    const info = binaryen.getFunctionInfo(module.getFunctionByIndex(i));
    if (info.module && info.base === "log_execution") hook = info;
  }
  if (!hook) throw new Error("log-execution pass added no hook");
  module.removeFunction(hook.name);
  const fuel = () => module.global.get("loom_fuel", binaryen.i32);
  // Start-up code (a start function, constructors) runs inside `new Instance`, before the host
  // can set the counter: it starts full, and the host lowers it to the budget before a call.
  module.addGlobal("loom_fuel", binaryen.i32, true, module.i32.const(1_000_000_000));
  module.addFunction(
    hook.name,
    binaryen.createType([binaryen.i32]),
    binaryen.none,
    [],
    module.block(null, [
      module.global.set("loom_fuel", module.i32.sub(fuel(), module.i32.const(1))),
      module.if(module.i32.lt_s(fuel(), module.i32.const(0)), module.unreachable()),
    ]),
  );
  module.addFunction("loom_set_fuel", binaryen.createType([binaryen.i32]), binaryen.none, [], module.global.set("loom_fuel", module.local.get(0, binaryen.i32)));
  module.addFunction("loom_get_fuel", binaryen.none, binaryen.i32, [], fuel());
  module.addFunctionExport("loom_set_fuel", "loom_set_fuel");
  module.addFunctionExport("loom_get_fuel", "loom_get_fuel");
  binaryen.setAlwaysInlineMaxSize(20);
  module.runPasses(["inlining"]);
  if (!module.validate()) throw new Error("metered module does not validate");
  const result = module.emitBinary();
  module.dispose();
  return result;
}

/** Applies one textual patch, refusing to continue if the loader changed shape. */
function patch(source, from, to, { all = false } = {}) {
  const count = source.split(from).length - 1;
  if (count === 0 || (!all && count !== 1)) throw new Error(`micropython.mjs patch matched ${count} times: ${from.slice(0, 70)}`);
  return source.split(from).join(to);
}

function patchMicroPythonLoader(source) {
  let s = source;
  // Always take the web-worker path: no Node detection, no `module`/`fs`/`path` imports.
  s = patch(s, 'ENVIRONMENT_IS_WEB=!!globalThis.window,ENVIRONMENT_IS_WORKER=!!globalThis.WorkerGlobalScope,ENVIRONMENT_IS_NODE=globalThis.process?.versions?.node&&"renderer"!=globalThis.process?.type', "ENVIRONMENT_IS_WEB=!1,ENVIRONMENT_IS_WORKER=!0,ENVIRONMENT_IS_NODE=!1");
  s = patch(s, 'const{createRequire:createRequire}=await import("module");var require=createRequire(import.meta.url)', 'var require=()=>{throw new Error("require is unavailable")}');
  s = patch(s, "if(!globalThis.window&&!globalThis.WorkerGlobalScope)throw", "if(!1)throw");
  // Let the caller instantiate the precompiled module itself.
  s = patch(s, "let Module={locateFile:(path,scriptDirectory)=>url||scriptDirectory+path}", "let Module={locateFile:(path,scriptDirectory)=>url||scriptDirectory+path,instantiateWasm:options.instantiateWasm}");
  // Python's `js` module is proxy reference 0: make it an empty frozen object, not globalThis.
  s = patch(s, "globalThis.proxy_js_ref=[globalThis,void 0]", "globalThis.proxy_js_ref=[LOOM_JS_ROOT,void 0]");
  s = patch(s, "globalThis.proxy_js_ref_map.set(globalThis,0)", "globalThis.proxy_js_ref_map.set(LOOM_JS_ROOT,0)");
  // Each interpreter instance serves one call and is then dropped; a finalizer that later
  // frees a proxy reference would reach into whichever instance globalThis.Module is by then.
  s = patch(s, 'globalThis.pyProxyFinalizationRegistry=new FinalizationRegistry(cRef=>{globalThis.proxy_js_map.delete(cRef),Module.ccall("proxy_c_free_obj","null",["number"],[cRef])})', "globalThis.pyProxyFinalizationRegistry={register(){},unregister(){}}");
  // The command-line entry for Node: never taken, and its imports must not reach the bundle.
  s = patch(s, 'if(globalThis.loadMicroPython=loadMicroPython,"object"==typeof process', 'if(!1&&"object"==typeof process');
  for (const name of ["path", "url", "fs"]) s = patch(s, `await import("${name}")`, "{}");
  s = patch(s, "import.meta.url", '"file:///micropython.mjs"', { all: true });
  if (/\bimport\s*\(/.test(s.replace(/pyimport\(/g, ""))) throw new Error("micropython.mjs still has a dynamic import");
  return `// Generated by scripts/meter-wasm.mjs from @micropython/micropython-webassembly-pyscript; do not edit.\nconst LOOM_JS_ROOT=Object.freeze(Object.create(null));\n${s}`;
}

const started = Date.now();
const quickjs = meter(read("node_modules/@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.wasm"));
writeFileSync(new URL("quickjs.wasm", out), quickjs);
const micropython = meter(read("node_modules/@micropython/micropython-webassembly-pyscript/micropython.wasm"));
writeFileSync(new URL("micropython.wasm", out), micropython);
writeFileSync(new URL("micropython.mjs", out), patchMicroPythonLoader(read("node_modules/@micropython/micropython-webassembly-pyscript/micropython.mjs").toString("utf8")));
writeFileSync(
  new URL("micropython.d.mts", out),
  `// Generated by scripts/meter-wasm.mjs; the part of the loader Loom uses.
export interface MicroPythonOptions {
  pystack?: number;
  heapsize?: number;
  linebuffer?: boolean;
  /** With linebuffer (the default) one string per line; without, one byte at a time. */
  stdout?: (data: string | Uint8Array) => void;
  stderr?: (data: string | Uint8Array) => void;
  instantiateWasm?: (imports: WebAssembly.Imports, done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void) => WebAssembly.Exports;
}
export interface MicroPython {
  runPython(code: string): unknown;
  /** Deep conversion of a Python list, tuple or dict proxy to plain JavaScript; other values pass through. */
  PyProxy: { toJs(value: unknown): unknown };
  globals: { get(key: string): unknown; set(key: string, value: unknown): void };
}
export function loadMicroPython(options: MicroPythonOptions): Promise<MicroPython>;
`,
);

const bundle = await build({
  entryPoints: [new URL("src/sandbox/guest-entry.ts", root).pathname],
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["workerd", "worker", "browser"],
  mainFields: ["module", "main"],
  minify: true,
  legalComments: "none",
  logLevel: "warning",
  plugins: [
    {
      name: "wasm-as-sibling-module",
      setup(b) {
        // The Worker Loader receives each .wasm as its own compiled module beside the guest.
        b.onResolve({ filter: /\.wasm$/ }, (args) => ({ path: `./${basename(args.path)}`, external: true }));
      },
    },
  ],
});
const guest = bundle.outputFiles[0].text;
const version = createHash("sha256").update(guest).update(quickjs).update(micropython).digest("hex").slice(0, 16);
writeFileSync(
  new URL("guest-bundle.ts", out),
  `// Generated by scripts/meter-wasm.mjs; do not edit.\nexport const GUEST_VERSION = ${JSON.stringify(version)};\nexport const GUEST_MAIN_MODULE: string = ${JSON.stringify(guest)};\n`,
);
console.log(`sandbox build: metered QuickJS (${quickjs.length} B) and MicroPython (${micropython.length} B), guest ${guest.length} B, ${Date.now() - started} ms`);
