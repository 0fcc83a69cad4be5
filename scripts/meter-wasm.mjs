// Build step for the transformation sandbox (`npm run build:sandbox`; run by `npm install`,
// `npm test` and `npm start` first). Offline, deterministic, a few seconds:
// 1. rewrites the QuickJS and MicroPython .wasm with binaryen so that every function entry
//    and every loop header spends one unit of a fuel counter and traps once it is spent;
//    the host sets the counter before each call through the exported `loom_set_fuel`.
//    Runaway code makes no call out of the wasm, so only fuel inside the wasm can stop it;
// 2. writes a copy of MicroPython's loader that accepts emscripten's `instantiateWasm` (so
//    the statically imported, already compiled module is used), has no Node-only imports,
//    and never hands a host object to Python (see patchMicroPythonLoader);
// 3. empties the slots of MicroPython's built-in module table that hold the bridges to the
//    host (`js`, `jsffi`) and raw memory access (`uctypes`), so importing them is an
//    ImportError; checked by running the result;
// 4. bundles one guest entry per language (what runs inside a Dynamic Worker) into ES module
//    source strings the main Worker hands to the Worker Loader.
// Outputs go to src/sandbox/generated/ (not committed).
import binaryen from "binaryen";
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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
  module.setFeatures(
    F.MVP |
      F.MutableGlobals |
      F.NontrappingFPToInt |
      F.SignExt |
      F.BulkMemory |
      F.BulkMemoryOpt |
      F.SIMD128 |
      F.ReferenceTypes |
      F.Multivalue |
      F.CallIndirectOverlong,
  );
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
  module.addFunction(
    "loom_set_fuel",
    binaryen.createType([binaryen.i32]),
    binaryen.none,
    [],
    module.global.set("loom_fuel", module.local.get(0, binaryen.i32)),
  );
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
  if (count === 0 || (!all && count !== 1))
    throw new Error(`micropython.mjs patch matched ${count} times: ${from.slice(0, 70)}`);
  return source.split(from).join(to);
}

function patchMicroPythonLoader(source) {
  let s = source;
  // Always take the web-worker path: no Node detection, no `module`/`fs`/`path` imports.
  s = patch(
    s,
    'ENVIRONMENT_IS_WEB=!!globalThis.window,ENVIRONMENT_IS_WORKER=!!globalThis.WorkerGlobalScope,ENVIRONMENT_IS_NODE=globalThis.process?.versions?.node&&"renderer"!=globalThis.process?.type',
    "ENVIRONMENT_IS_WEB=!1,ENVIRONMENT_IS_WORKER=!0,ENVIRONMENT_IS_NODE=!1",
  );
  s = patch(
    s,
    'const{createRequire:createRequire}=await import("module");var require=createRequire(import.meta.url)',
    'var require=()=>{throw new Error("require is unavailable")}',
  );
  s = patch(s, "if(!globalThis.window&&!globalThis.WorkerGlobalScope)throw", "if(!1)throw");
  // Let the caller instantiate the precompiled module itself.
  s = patch(
    s,
    "let Module={locateFile:(path,scriptDirectory)=>url||scriptDirectory+path}",
    "let Module={locateFile:(path,scriptDirectory)=>url||scriptDirectory+path,instantiateWasm:options.instantiateWasm}",
  );
  // Python's `js` module is proxy reference 0: make it an empty frozen object, not globalThis
  // (the module is also removed from the build, see removeBuiltinModules).
  s = patch(s, "globalThis.proxy_js_ref=[globalThis,void 0]", "globalThis.proxy_js_ref=[LOOM_JS_ROOT,void 0]");
  s = patch(s, "globalThis.proxy_js_ref_map.set(globalThis,0)", "globalThis.proxy_js_ref_map.set(LOOM_JS_ROOT,0)");
  // Each interpreter instance serves one call and is then dropped; a finalizer that later
  // frees a proxy reference would reach into whichever instance globalThis.Module is by then.
  s = patch(
    s,
    'globalThis.pyProxyFinalizationRegistry=new FinalizationRegistry(cRef=>{globalThis.proxy_js_map.delete(cRef),Module.ccall("proxy_c_free_obj","null",["number"],[cRef])})',
    "globalThis.pyProxyFinalizationRegistry={register(){},unregister(){}}",
  );
  // The one place a host object becomes a Python JsProxy (an attribute read, a call's result,
  // jsffi.to_js ...): refuse. The host itself only ever hands Python strings and numbers.
  s = patch(
    s,
    "else{let id;const existing_ref=proxy_js_ref_map.get(js_obj);",
    "else{throw new LoomBridgeRefused;let id;const existing_ref=proxy_js_ref_map.get(js_obj);",
  );
  // The result is converted by defining properties on null-prototype objects, never by
  // assignment, so no setter anywhere on a prototype chain sees a value (defence in depth).
  s = patch(s, "js_dict={}", "js_dict=Object.create(null)");
  s = patch(s, "js_dict[js_key]=PyProxy.toJs(js_value)", "loomDefine(js_dict,js_key,PyProxy.toJs(js_value))");
  s = patch(s, "js_array.push(PyProxy.toJs(js_item))", "loomDefine(js_array,js_array.length,PyProxy.toJs(js_item))");
  // The command-line entry for Node: never taken, and its imports must not reach the bundle.
  s = patch(
    s,
    'if(globalThis.loadMicroPython=loadMicroPython,"object"==typeof process',
    'if(!1&&"object"==typeof process',
  );
  for (const name of ["path", "url", "fs"]) s = patch(s, `await import("${name}")`, "{}");
  s = patch(s, "import.meta.url", '"file:///micropython.mjs"', { all: true });
  if (/\bimport\s*\(/.test(s.replace(/pyimport\(/g, ""))) throw new Error("micropython.mjs still has a dynamic import");
  return `// Generated by scripts/meter-wasm.mjs from @micropython/micropython-webassembly-pyscript; do not edit.
const LOOM_JS_ROOT=Object.freeze(Object.create(null));
/** Thrown wherever Python would have reached a host object. */
export class LoomBridgeRefused extends Error{constructor(){super("the sandbox has no bridge to the host")}}
const LOOM_DEFINE_PROPERTY=Object.defineProperty;
/** Result keys as JSON would write them (str, int, float, bool, None); any other key is not JSON. */
function loomDefine(target,key,value){if(key!==null&&typeof key!=="string"&&typeof key!=="number"&&typeof key!=="boolean")throw new TypeError("result key is not JSON");LOOM_DEFINE_PROPERTY(target,String(key),{value,enumerable:!0,writable:!0,configurable:!0})}
${s}`;
}

/** Modules taken out of MicroPython: the bridges to the host, and raw access to the interpreter's memory. */
const REMOVED_MODULES = ["js", "jsffi", "uctypes"];

/** Runs Python in a fresh instance of `wasm` with the generated loader; answers what it printed and the instance. */
async function runMicroPython(wasm, code) {
  const { loadMicroPython } = await import(`${new URL("micropython.mjs", out).href}?${Date.now()}`);
  const module = new WebAssembly.Module(wasm);
  let instance;
  const lines = [];
  const python = await loadMicroPython({
    stdout: (line) => lines.push(line),
    instantiateWasm(imports, done) {
      instance = new WebAssembly.Instance(module, imports);
      done(instance, module);
      return instance.exports;
    },
  });
  python.runPython(code);
  return { lines, memory: new Uint32Array(instance.exports.memory.buffer) };
}

/**
 * Empties the built-in module table's slots for REMOVED_MODULES in the wasm's data segment.
 * A ROM map slot whose key is 0 is an empty slot to every MicroPython lookup and listing, so
 * `import js` then fails like any unknown module. The slot is found from the running
 * interpreter: `id(module)` is the module object's address, its globals table starts with
 * (`__name__`, name), and a table entry is the pair (name, address); every occurrence of the
 * pair is emptied (uctypes is also in a second, three-entry ROM map). The result is run again
 * to check every import of them now fails and an ordinary one still works.
 */
async function removeBuiltinModules(wasm) {
  const probe = await runMicroPython(
    wasm,
    REMOVED_MODULES.map((name) => `print(id(__import__(${JSON.stringify(name)})))`).join("\n"),
  );
  const bytes = Buffer.from(wasm);
  let nameKey;
  REMOVED_MODULES.forEach((name, i) => {
    const address = Number(probe.lines[i]);
    const table = probe.memory[probe.memory[address / 4 + 1] / 4 + 3];
    const [key, value] = [probe.memory[table / 4], probe.memory[table / 4 + 1]];
    nameKey ??= key;
    // Every module's first global is __name__, a qstr (tagged 0b010): anything else means the layout changed.
    if (key !== nameKey || (value & 7) !== 2) throw new Error(`MicroPython module ${name}: unexpected globals layout`);
    const pair = Buffer.alloc(8);
    pair.writeUInt32LE(value, 0);
    pair.writeUInt32LE(address, 4);
    const slots = [];
    for (let at = bytes.indexOf(pair); at >= 0; at = bytes.indexOf(pair, at + 1)) slots.push(at);
    if (slots.length < 1 || slots.length > 2)
      throw new Error(`MicroPython module ${name}: ${slots.length} table slots in the binary`);
    for (const at of slots) bytes.writeUInt32LE(0, at);
  });
  const names = JSON.stringify([...REMOVED_MODULES, ...REMOVED_MODULES.map((n) => `u${n}`), "asyncio"]);
  const check = await runMicroPython(
    bytes,
    `import json\nfor n in ${names}:\n    try:\n        __import__(n)\n        print("still there: " + n)\n    except ImportError:\n        pass\nprint("checked")`,
  );
  if (check.lines.join("\n") !== "checked")
    throw new Error(`MicroPython module removal failed: ${check.lines.join("; ")}`);
  return new Uint8Array(bytes);
}

const started = Date.now();
const quickjs = meter(read("node_modules/@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.wasm"));
writeFileSync(new URL("quickjs.wasm", out), quickjs);
writeFileSync(
  new URL("micropython.mjs", out),
  patchMicroPythonLoader(
    read("node_modules/@micropython/micropython-webassembly-pyscript/micropython.mjs").toString("utf8"),
  ),
);
const micropython = await removeBuiltinModules(
  meter(read("node_modules/@micropython/micropython-webassembly-pyscript/micropython.wasm")),
);
writeFileSync(new URL("micropython.wasm", out), micropython);
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
/** Thrown wherever Python would have reached a host object. */
export class LoomBridgeRefused extends Error {}
export interface MicroPython {
  runPython(code: string): unknown;
  /** Deep conversion of a Python list, tuple or dict proxy to plain JavaScript (dicts as null-prototype objects); other values pass through. */
  PyProxy: { toJs(value: unknown): unknown };
  globals: { get(key: string): unknown; set(key: string, value: unknown): void };
}
export function loadMicroPython(options: MicroPythonOptions): Promise<MicroPython>;
`,
);

/** Bundles one guest entry (src/sandbox/guest-<language>.ts) into a single ES module source. */
async function bundleGuest(language) {
  const bundle = await build({
    entryPoints: [new URL(`src/sandbox/guest-${language}.ts`, root).pathname],
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
          // The Worker Loader receives the .wasm as its own compiled module beside the guest.
          b.onResolve({ filter: /\.wasm$/ }, (args) => ({ path: `./${basename(args.path)}`, external: true }));
        },
      },
    ],
  });
  return bundle.outputFiles[0].text;
}

// One guest per language, so a run's fresh Dynamic Worker compiles only the interpreter it uses.
const guestJavaScript = await bundleGuest("javascript");
const guestPython = await bundleGuest("python");
// Names the build in the loader's isolate ids, so a deploy never reuses an isolate of an older guest.
const guestVersion = createHash("sha256")
  .update(guestJavaScript)
  .update(guestPython)
  .update(quickjs)
  .update(micropython)
  .digest("hex")
  .slice(0, 16);
writeFileSync(
  new URL("guest-bundle.ts", out),
  `// Generated by scripts/meter-wasm.mjs; do not edit.\nexport const GUEST_JAVASCRIPT: string = ${JSON.stringify(guestJavaScript)};\nexport const GUEST_PYTHON: string = ${JSON.stringify(guestPython)};\nexport const GUEST_VERSION: string = ${JSON.stringify(guestVersion)};\n`,
);
console.log(
  `sandbox build: metered QuickJS (${quickjs.length} B) and MicroPython (${micropython.length} B), guests ${guestJavaScript.length} / ${guestPython.length} B, ${Date.now() - started} ms`,
);
