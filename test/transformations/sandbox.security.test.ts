import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/env";
import micropython from "../../src/sandbox/generated/micropython.wasm";
import { LoomBridgeRefused, loadMicroPython } from "../../src/sandbox/generated/micropython.mjs";
import { HostRefused } from "../../src/sandbox/host-calls";
import { micropythonImports } from "../../src/sandbox/micropython-imports";
import { runSandboxed, sandboxLimits } from "../../src/sandbox/sandbox";
import { seedOrg } from "../helpers";
import { placedAt } from "./fixtures";

// Issue 11: guest code must never reach a host object, and nothing one run does may be seen by
// a later run of another organization, in either placement. The attack is in two steps: org A
// plants (through every bridge it can find) a setter for the key the victim will output and
// replacements for what carries inputs and logs; org B runs; org A comes back to harvest.

const PLACEMENTS: [string, Partial<Env>][] = [
  ["a Dynamic Worker (the loader)", {}],
  ["inline (SANDBOX_PLACEMENT=inline)", { SANDBOX_PLACEMENT: "inline" }],
];

/** Org A, Python: every way to a host object it knows; each that works plants an accessor or keeps state. */
const PLANT_PY = `import sys
def plant(key):
    reached = []
    try:
        import jsffi
        O = jsffi.to_js({}).constructor
        stash = jsffi.to_js([])
        setter = jsffi.to_js({'configurable': True})
        setter.set = stash.push.bind(stash)
        O.defineProperty(O.prototype, key, setter)
        O.defineProperty(O.prototype, 'stash_' + key, jsffi.to_js({'value': stash, 'configurable': True}))
        reached.append('jsffi.to_js')
    except Exception:
        pass
    for name in ('js', 'jsffi', 'uctypes', 'ujs', 'ujsffi', 'asyncio'):
        try:
            __import__(name)
            reached.append(name)
        except ImportError:
            pass
    reached.extend(n for n in sys.modules if 'js' in n)
    import builtins
    builtins.planted = key
    return {'reached': reached}
`;

/** Org A again, later: reads back whatever the plant kept, and removes the accessor. */
const HARVEST_PY = `def harvest(key):
    found = []
    try:
        import jsffi
        O = jsffi.to_js({}).constructor
        stash = getattr(jsffi.to_js({}), 'stash_' + key)
        found = [str(stash[i]) for i in range(stash.length)]
        O.deleteProperty(O.prototype, key)
    except Exception:
        pass
    import builtins
    return {'found': found, 'planted': getattr(builtins, 'planted', None)}
`;

/** Org A in JavaScript: the same against QuickJS's own intrinsics and globals. */
const PLANT_JS = `function plant({ key }) {
  globalThis.stash = [];
  Object.defineProperty(Object.prototype, key, { set(v) { stash.push(v); }, configurable: true });
  const parse = JSON.parse, stringify = JSON.stringify;
  JSON.parse = (text) => { stash.push(text); return parse(text); };
  JSON.stringify = (value) => { const text = stringify(value); stash.push(text); return text; };
  console.log = (...parts) => stash.push(parts.join(" "));
  return { reached: [typeof fetch, typeof process, typeof WebAssembly, typeof setTimeout] };
}`;
const HARVEST_JS = `function harvest() {
  return { found: typeof stash === "undefined" ? [] : stash.map(String), parse: String(JSON.parse).includes("stash"), log: String(console.log).includes("stash") };
}`;

const victimPy = (key: string) => `def victim(secret, doc):
    print('inside', secret)
    return {${JSON.stringify(key)}: secret, 'echo': doc}
`;
const victimJs = (key: string) => `function victim({ secret, doc }) {
  console.log("inside", secret);
  return { ${JSON.stringify(key)}: secret, echo: doc };
}`;

describe("transformations: no run reaches the host or a later run of another organization", () => {
  for (const [placement, overrides] of PLACEMENTS) {
    it(`plant then harvest, in ${placement}: outputs, inputs and logs of the victim are untouched and nothing of them reaches the attacker`, async () => {
      const sandbox = placedAt(overrides);
      const [a, b] = [await seedOrg(), await seedOrg()];
      const key = `k${crypto.randomUUID().replaceAll("-", "")}`;
      const secret = `secret-of-b-${crypto.randomUUID()}`;
      // A long string travels to Python beside the JSON rather than inside it: both input paths.
      const doc = { title: "quarterly", body: `${secret} `.repeat(20), nested: [{ n: 1, note: secret }] };
      const ids = {
        plantPy: await sandbox.create(a.owner, { function_name: "plant", function: PLANT_PY }),
        harvestPy: await sandbox.create(a.owner, { function_name: "harvest", function: HARVEST_PY }),
        plantJs: await sandbox.create(a.owner, { function_name: "plant", language: "javascript", function: PLANT_JS }),
        harvestJs: await sandbox.create(a.owner, {
          function_name: "harvest",
          language: "javascript",
          function: HARVEST_JS,
        }),
        victimPy: await sandbox.create(b.owner, { function_name: "victim", function: victimPy(key) }),
        victimJs: await sandbox.create(b.owner, {
          function_name: "victim",
          language: "javascript",
          function: victimJs(key),
        }),
      };
      const expectedVictim = {
        status: 200,
        body: { status: "success", result: { [key]: secret, echo: doc }, logs: [`inside ${secret}`] },
      };

      const seen = {
        plantPy: await sandbox.run(a.owner, ids.plantPy, { key }),
        victimPy: await sandbox.run(b.owner, ids.victimPy, { secret, doc }),
        victimJsAfterPy: await sandbox.run(b.owner, ids.victimJs, { secret, doc }),
        harvestPy: await sandbox.run(a.owner, ids.harvestPy, { key }),
        plantJs: await sandbox.run(a.owner, ids.plantJs, { key }),
        victimJs: await sandbox.run(b.owner, ids.victimJs, { secret, doc }),
        victimPyAfterJs: await sandbox.run(b.owner, ids.victimPy, { secret, doc }),
        harvestJs: await sandbox.run(a.owner, ids.harvestJs, { key }),
      };
      expect(seen).toEqual({
        plantPy: { status: 200, body: { status: "success", result: { reached: [] } } },
        victimPy: expectedVictim,
        victimJsAfterPy: expectedVictim,
        harvestPy: { status: 200, body: { status: "success", result: { found: [], planted: null } } },
        plantJs: {
          status: 200,
          body: { status: "success", result: { reached: ["undefined", "undefined", "undefined", "undefined"] } },
        },
        victimJs: expectedVictim,
        victimPyAfterJs: expectedVictim,
        harvestJs: { status: 200, body: { status: "success", result: { found: [], parse: false, log: false } } },
      });
    });
  }
});

describe("transformations: Python has no bridge to the host", () => {
  const bridges: [string, string][] = [
    ["import jsffi", "jsffi"],
    ["from jsffi import to_js, create_proxy", "jsffi"],
    ["import js", "js"],
    ["from js import globalThis", "js"],
    ["m = __import__('jsffi')", "jsffi"],
    ["import ujsffi", "ujsffi"],
    ["import uctypes", "uctypes"],
    // asyncio is frozen into the build and imports js for its timers.
    ["import asyncio", "js"],
  ];
  for (const [statement, module] of bridges) {
    it(`${statement}: a 400 run error (ImportError), in both placements`, async () => {
      const org = await seedOrg();
      const source = `def f():\n    ${statement}\n    return {}\n`;
      for (const [, overrides] of PLACEMENTS) {
        const sandbox = placedAt(overrides);
        const id = await sandbox.create(org.owner, { function_name: "f", function: source });
        expect(await sandbox.run(org.owner, id, {})).toEqual({
          status: 400,
          body: { status: "failed", error: `transformation raised an error: ImportError: no module named '${module}'` },
        });
      }
    });
  }

  it("refuses every JavaScript-FFI import of MicroPython's wasm at the host, whatever the guest does", () => {
    const declared = WebAssembly.Module.imports(micropython).filter((i) => i.kind === "function");
    const fakes = Object.fromEntries(declared.map((i) => [i.name, () => 0]));
    const memory = new WebAssembly.Memory({ initial: 1 });
    const given = micropythonImports(
      micropython,
      { env: fakes, wasi_snapshot_preview1: fakes },
      { fuel: () => undefined, memory: () => memory, stdout: () => undefined, memoryBytes: 1 << 20 },
    );
    const refused: string[] = [];
    for (const { module, name } of declared) {
      try {
        (given[module][name] as (...args: number[]) => unknown)(1, 0, 0, 0);
      } catch (error) {
        expect(error).toBeInstanceOf(HostRefused);
        refused.push(name);
      }
    }
    expect(refused.sort()).toEqual(JS_FFI.slice().sort());
  });

  it("never turns a host object into a Python value, and builds results without assignment", async () => {
    const python = await loadMicroPython({
      instantiateWasm(imports, done) {
        let memory: WebAssembly.Memory | undefined;
        const instance = new WebAssembly.Instance(
          micropython,
          micropythonImports(micropython, imports, {
            fuel: () => undefined,
            memory: () => memory as WebAssembly.Memory,
            stdout: () => undefined,
            memoryBytes: 1 << 24,
          }),
        );
        memory = instance.exports.memory as WebAssembly.Memory;
        done(instance, micropython);
        return instance.exports;
      },
    });
    expect(() => python.globals.set("o", {})).toThrow(LoomBridgeRefused);
    expect(() => python.globals.set("f", () => 1)).toThrow(LoomBridgeRefused);
    python.runPython("d = {'a': [1, {'b': 2}]}");
    const converted = python.PyProxy.toJs(python.globals.get("d")) as { a: [number, object] };
    expect(Object.getPrototypeOf(converted)).toBe(null);
    expect(Object.getPrototypeOf(converted.a[1])).toBe(null);
    expect(JSON.stringify(converted)).toBe('{"a":[1,{"b":2}]}');
  });
});

/** The webassembly port's JavaScript FFI (objjsproxy.c, proxy_c.c, modjsffi.c): every import that touches a host object. */
const JS_FFI = [
  "call0",
  "call0_kwarg",
  "call1",
  "call2",
  "calln",
  "calln_kwarg",
  "create_promise",
  "has_attr",
  "js_check_existing",
  "js_get_error_info",
  "js_get_iter",
  "js_get_proxy_js_ref_info",
  "js_iter_next",
  "js_reflect_construct",
  "js_subscr_load",
  "js_subscr_store",
  "js_then_continue",
  "js_then_reject",
  "js_then_resolve",
  "lookup_attr",
  "proxy_convert_mp_to_js_then_js_to_js_then_js_to_mp_obj_jsside",
  "proxy_convert_mp_to_js_then_js_to_mp_obj_jsside",
  "store_attr",
];

describe("transformations: one Dynamic Worker per organization", () => {
  const task = (source: string) =>
    ({
      kind: "run",
      language: "javascript",
      source,
      functionName: "f",
      inputsJson: "{}",
      limits: sandboxLimits(env),
    }) as const;

  it("never sends two organizations' runs to the same isolate, and keeps each organization's own", async () => {
    const asked: string[] = [];
    const loader = env.LOADER as WorkerLoader;
    const recording: WorkerLoader = {
      get: (name, code) => {
        asked.push(String(name));
        return loader.get(name, code);
      },
      load: (code) => loader.load(code),
    };
    const placed = { ...env, LOADER: recording };
    const ok = { ok: true, outputJson: '{"y":1}' };
    expect(await runSandboxed(placed, task("function f() { return { y: 1 }; }"), "org-a")).toMatchObject(ok);
    expect(await runSandboxed(placed, task("function f() { return { y: 1 }; }"), "org-b")).toMatchObject(ok);
    expect(await runSandboxed(placed, task("function f() { return { y: 1 }; }"), "org-a")).toMatchObject(ok);
    const [a, b, again] = asked;
    expect(a).toMatch(/^loom-sandbox-[0-9a-f]{16}-javascript-org-a-\d+$/);
    expect(b).toMatch(/-org-b-/);
    expect(a).not.toBe(b);
    expect(again).toBe(a);
  });
});
