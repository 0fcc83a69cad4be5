import { LoomBridgeRefused, loadMicroPython } from "./generated/micropython.mjs";
import { micropythonImports } from "./micropython-imports";
import {
  HOST_REFUSED,
  RunLog,
  SETUP_FUEL,
  failure,
  hostFault,
  succeeded,
  truncate,
  type FuelExports,
  type SandboxOutcome,
  type SandboxTask,
} from "./sandbox.types";

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
__loom_ns = {"__name__": "transformation"}
exec(__loom_code, __loom_ns)
__loom_f = __loom_ns.get(__loom_name)
if not callable(__loom_f):
    __loom_state = "missing"
else:
    __loom_r = __loom_f(**__loom_args)
    __loom_state = "ok" if isinstance(__loom_r, dict) else "not_object"
`;

/**
 * Decodes the inputs on the start-up allowance, not the user's budget (inputs are bounded by
 * the route and are not the user's code). MicroPython's json.loads costs about 60 fuel units
 * per character, and its cost grows with the square of a single string's length, so long
 * strings skip it: the host cuts them out of the JSON (leaving `{"\u0000loom": n}` in their
 * place), hands each over as a Python str directly, and they are put back after decoding.
 */
const DECODE = `
import json as __loom_json
__loom_strs = [globals()["__loom_s" + str(i)] for i in range(__loom_n)]
def __loom_fill(o):
    if isinstance(o, dict):
        if len(o) == 1 and "\\x00loom" in o:
            return __loom_strs[o["\\x00loom"]]
        for k in o:
            o[k] = __loom_fill(o[k])
    elif isinstance(o, list):
        for i in range(len(o)):
            o[i] = __loom_fill(o[i])
    return o
__loom_args = __loom_fill(__loom_json.loads(__loom_in))
`;

/** Strings at least this long travel beside the JSON rather than inside it. */
const LONG_STRING = 256;

/** Replaces long strings by numbered placeholders; answers the skeleton's JSON and the strings. */
export function splitLongStrings(inputsJson: string): { skeleton: string; strings: string[] } {
  const strings: string[] = [];
  const cut = (value: unknown): unknown => {
    if (typeof value === "string" && value.length >= LONG_STRING) {
      strings.push(value);
      return { "\u0000loom": strings.length - 1 };
    }
    if (Array.isArray(value)) return value.map(cut);
    if (value !== null && typeof value === "object")
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cut(v)]));
    return value;
  };
  const skeleton = JSON.stringify(cut(JSON.parse(inputsJson)));
  return { skeleton, strings };
}

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

/**
 * The result as JSON text, or undefined when it is not plain JSON. It is converted on the host
 * side into null-prototype objects built with defineProperty (see the loader patch); a dict key
 * that is not a JSON key makes the conversion throw, which is "not JSON" too.
 */
function resultJson(python: Awaited<ReturnType<typeof loadMicroPython>>): string | undefined {
  const result = python.globals.get("__loom_r");
  let converted: unknown;
  try {
    converted = python.PyProxy.toJs(result);
  } catch (error) {
    if (error instanceof TypeError) return undefined;
    throw error;
  }
  return plainJson(converted);
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
  if (type === "RecursionError" || /maximum recursion depth/i.test(last))
    return failure("stack", "transformation exceeded its stack limit");
  if (phase === "parse" && (type === "SyntaxError" || type === "IndentationError"))
    return failure("syntax", `function source does not parse: ${truncate(last)}`);
  return failure("runtime", `transformation raised an error: ${truncate(last)}`);
}

/** One call in a fresh MicroPython. Callers must not overlap calls: the loader keeps state in globals (see engine.ts). */
export async function runPython(task: SandboxTask, wasm: WebAssembly.Module): Promise<SandboxOutcome> {
  let fuel: FuelExports | undefined;
  let phase: "parse" | "run" = "parse";
  const log = new RunLog();
  let memory: WebAssembly.Memory | undefined;
  try {
    const python = await loadMicroPython({
      heapsize: INITIAL_HEAP_BYTES,
      pystack: Math.max(256, Math.floor(task.limits.stackBytes / 16)),
      // stdout and stderr are taken over in micropythonImports; what else reaches emscripten's
      // terminal (a file opened on /dev/stdout) is dropped, never written to the Worker's log.
      linebuffer: false,
      stdout: () => undefined,
      stderr: () => undefined,
      instantiateWasm(imports, done) {
        const host = {
          fuel: () => fuel,
          memory: () => memory as WebAssembly.Memory,
          stdout: () => (phase === "run" ? log : undefined),
          memoryBytes: task.limits.memoryBytes,
        };
        const instance = new WebAssembly.Instance(wasm, micropythonImports(wasm, imports, host));
        fuel = instance.exports as unknown as FuelExports;
        memory = instance.exports.memory as WebAssembly.Memory;
        fuel.loom_set_fuel(SETUP_FUEL);
        done(instance, wasm);
        return instance.exports;
      },
    });
    // Compiling (bounded by the source size) is not running the user's code either.
    python.globals.set("__loom_src", task.source);
    python.runPython(COMPILE);
    if (task.kind === "check") {
      if (!declaresPythonFunction(task.source, task.functionName))
        return failure(
          "missing_function",
          `function_name '${task.functionName}' is not defined in the function source`,
        );
      return { ok: true, outputJson: null };
    }
    phase = "run";
    python.globals.set("__loom_name", task.functionName);
    const { skeleton, strings } = splitLongStrings(task.inputsJson);
    python.globals.set("__loom_in", skeleton);
    python.globals.set("__loom_n", strings.length);
    strings.forEach((text, i) => python.globals.set(`__loom_s${i}`, text));
    fuel?.loom_set_fuel(SETUP_FUEL);
    python.runPython(DECODE);
    fuel?.loom_set_fuel(task.limits.fuel);
    python.runPython(CALL);
    const state = python.globals.get("__loom_state");
    if (state === "missing")
      return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
    if (state !== "ok") return failure("not_json", "transformation must return a JSON object");
    const text = resultJson(python);
    if (text === undefined) return failure("not_json", "transformation must return a JSON object");
    if (text.length > task.limits.outputBytes)
      return failure("output_too_large", `transformation output exceeds ${task.limits.outputBytes} bytes`);
    return succeeded(text, log);
  } catch (error) {
    if (fuel && fuel.loom_get_fuel() < 0) return failure("fuel", "transformation exceeded its instruction budget");
    if (error instanceof LoomBridgeRefused) return failure("runtime", HOST_REFUSED);
    return pythonError(error, phase) ?? hostFault(error, fuel);
  }
}
