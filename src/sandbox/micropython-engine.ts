import { loadMicroPython } from "./generated/micropython.mjs";
import { SETUP_FUEL, chargeHostCalls, failure, hostFault, truncate, type FuelExports, type SandboxOutcome, type SandboxTask } from "./sandbox.types";

/** MicroPython's initial garbage-collected heap; it grows (through the capped hook below) as needed. */
const INITIAL_HEAP_BYTES = 1024 * 1024;

/** Compiles the user's source, reporting only syntax errors; runs nothing. */
const COMPILE = `__loom_code = compile(__loom_src, "transformation.py", "exec")`;

/**
 * Runs the compiled module in its own namespace, then calls the function with the inputs as
 * keyword arguments. The result is handed to the host as a Python object and converted there:
 * MicroPython's json.dumps spends about a hundred fuel units per character (and prints sets
 * and NaN as invalid JSON), which would make large but honest outputs run out of budget.
 */
const CALL = `
import json as __loom_json
__loom_ns = {"__name__": "transformation"}
exec(__loom_code, __loom_ns)
__loom_f = __loom_ns.get(__loom_name)
if not callable(__loom_f):
    __loom_state = "missing"
else:
    __loom_r = __loom_f(**__loom_json.loads(__loom_in))
    __loom_state = "ok" if isinstance(__loom_r, dict) else "not_object"
`;

/** Serializes a converted result if it is plain JSON (no leftover Python objects, no NaN), else undefined. */
export function plainJson(value: unknown): string | undefined {
  const isPlain = (v: unknown, depth: number): boolean => {
    if (depth > 256) return false;
    if (v === null || typeof v === "string" || typeof v === "boolean") return true;
    if (typeof v === "number") return Number.isFinite(v);
    if (Array.isArray(v)) return v.every((item) => isPlain(item, depth + 1));
    if (typeof v !== "object") return false;
    const proto = Object.getPrototypeOf(v) as unknown;
    if (proto !== Object.prototype && proto !== null) return false;
    return Object.values(v as Record<string, unknown>).every((item) => isPlain(item, depth + 1));
  };
  return isPlain(value, 0) ? JSON.stringify(value) : undefined;
}

/** Whether the source defines `name` at its top level (a `def`, or an assignment such as a lambda). */
export function declaresPythonFunction(source: string, name: string): boolean {
  return new RegExp(`^(async\\s+def|def)\\s+${name}\\s*\\(|^${name}\\s*=`, "m").test(source);
}

interface PythonErrorShape {
  name?: string;
  type?: string;
  message?: string;
}

function pythonError(error: unknown, phase: "parse" | "run"): SandboxOutcome | undefined {
  const shape = error as PythonErrorShape;
  if (typeof error !== "object" || error === null || shape.name !== "PythonError") return undefined;
  const type = shape.type ?? "Error";
  const lines = (shape.message ?? "").trim().split("\n");
  const last = lines[lines.length - 1] ?? "";
  if (type === "MemoryError") return failure("memory", "transformation exceeded its memory limit");
  if (type === "RecursionError" || /maximum recursion depth/i.test(last)) return failure("stack", "transformation exceeded its stack limit");
  if (phase === "parse" && (type === "SyntaxError" || type === "IndentationError")) return failure("syntax", `function source does not parse: ${truncate(last)}`);
  return failure("runtime", `transformation raised an error: ${truncate(last)}`);
}

// The loader keeps its state in globals (globalThis.Module and the proxy tables), so two
// interpreters must never be alive at once in one isolate: calls take turns.
let turn: Promise<unknown> = Promise.resolve();

export function runPython(task: SandboxTask, wasm: WebAssembly.Module): Promise<SandboxOutcome> {
  const mine = turn.then(() => runPythonAlone(task, wasm));
  turn = mine.catch(() => undefined);
  return mine;
}

async function runPythonAlone(task: SandboxTask, wasm: WebAssembly.Module): Promise<SandboxOutcome> {
  let fuel: FuelExports | undefined;
  let phase: "parse" | "run" = "parse";
  try {
    const python = await loadMicroPython({
      heapsize: INITIAL_HEAP_BYTES,
      pystack: Math.max(256, Math.floor(task.limits.stackBytes / 16)),
      linebuffer: false,
      // print() output is not part of the result; dropped as it comes so it cannot pile up.
      stdout: () => undefined,
      stderr: () => undefined,
      instantiateWasm(imports, done) {
        const env = imports.env as Record<string, unknown>;
        const grow = env.emscripten_resize_heap as (bytes: number) => number;
        const cap = task.limits.memoryBytes;
        // Refusing growth makes malloc fail, which MicroPython reports as MemoryError.
        env.emscripten_resize_heap = (bytes: number) => ((bytes >>> 0) > cap ? 0 : grow(bytes));
        const instance = new WebAssembly.Instance(wasm, chargeHostCalls(imports, () => fuel));
        fuel = instance.exports as unknown as FuelExports;
        fuel.loom_set_fuel(SETUP_FUEL);
        done(instance, wasm);
        return instance.exports;
      },
    });
    fuel?.loom_set_fuel(task.limits.fuel);
    python.globals.set("__loom_src", task.source);
    python.runPython(COMPILE);
    if (task.kind === "check") {
      if (!declaresPythonFunction(task.source, task.functionName)) return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
      return { ok: true, outputJson: null };
    }
    phase = "run";
    python.globals.set("__loom_name", task.functionName);
    python.globals.set("__loom_in", task.inputsJson);
    python.runPython(CALL);
    const state = python.globals.get("__loom_state");
    if (state === "missing") return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
    if (state !== "ok") return failure("not_json", "transformation must return a JSON object");
    const text = plainJson(python.PyProxy.toJs(python.globals.get("__loom_r")));
    if (text === undefined) return failure("not_json", "transformation must return a JSON object");
    if (text.length > task.limits.outputBytes) return failure("output_too_large", `transformation output exceeds ${task.limits.outputBytes} bytes`);
    return { ok: true, outputJson: text };
  } catch (error) {
    if (fuel && fuel.loom_get_fuel() < 0) return failure("fuel", "transformation exceeded its instruction budget");
    return pythonError(error, phase) ?? hostFault(error, fuel);
  }
}
