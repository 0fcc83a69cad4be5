import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type DisposableResult,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
} from "quickjs-emscripten-core";
import releaseSync from "@jitl/quickjs-wasmfile-release-sync";
import { meterImports } from "./host-calls";
import {
  LOG_LINE_BYTES,
  LOG_MAX_BYTES,
  LOG_MAX_LINES,
  RunLog,
  SETUP_FUEL,
  failure,
  hostFault,
  succeeded,
  truncate,
  type FuelExports,
  type SandboxOutcome,
  type SandboxRunTask,
  type SandboxTask,
} from "./sandbox.types";

/**
 * Runs before the user's script: `console.*` as plain guest code. Lines are formatted and kept
 * inside the interpreter, under the same caps as RunLog (what is past them is dropped there,
 * never copied out, and the formatting is the guest's own fuel), and the host reads them once,
 * after the run, through the function this script evaluates to. Nothing of the host is reachable
 * from the guest: no host function is installed at all.
 */
const CONSOLE = `(() => {
  const lines = [];
  let bytes = 0, dropped = false;
  const stringify = JSON.stringify, toText = String, slice = Function.prototype.call.bind(String.prototype.slice);
  const format = (value) => {
    if (typeof value === "string") return value;
    try { const text = stringify(value); return text === undefined ? toText(value) : text; } catch (e) { try { return toText(value); } catch (e2) { return "[unprintable]"; } }
  };
  const write = (...args) => {
    if (lines.length >= ${LOG_MAX_LINES} || bytes >= ${LOG_MAX_BYTES}) { dropped = true; return; }
    let text = "";
    for (let i = 0; i < args.length && text.length <= ${LOG_LINE_BYTES}; i++) text += (i ? " " : "") + format(args[i]);
    if (text.length > ${LOG_LINE_BYTES}) text = slice(text, 0, ${LOG_LINE_BYTES}) + "...";
    lines[lines.length] = text;
    bytes += text.length;
  };
  globalThis.console = { log: write, info: write, warn: write, error: write, debug: write };
  return () => stringify({ lines, dropped });
})()`;

/**
 * Runs after the user's script, as a second script, so the user's top-level declarations are
 * visible. It evaluates to a function the host calls with the inputs as JSON text (a string is
 * all that crosses in); that calls the user's function and answers a verdict function the host
 * calls once the promise jobs have run: the state ("ok", "missing", ...), or with "out" the
 * output text (checked against the output cap inside, so an oversized one never crosses out),
 * or with "error" the rejection value.
 */
function harness(functionName: string, outputBytes: number): string {
  return `((inputsJson) => {
  let state = "pending", out, error;
  const stringify = JSON.stringify;
  const done = (value) => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) { state = "not_object"; return; }
    let text;
    try { text = stringify(value); } catch (e) { state = "not_json"; return; }
    if (typeof text !== "string") { state = "not_json"; return; }
    if (text.length > ${outputBytes}) { state = "too_large"; return; }
    out = text; state = "ok";
  };
  const verdict = (what) => what === "out" ? out : what === "error" ? error : state;
  if (typeof ${functionName} !== "function") { state = "missing"; return verdict; }
  const result = ${functionName}(JSON.parse(inputsJson));
  if (result !== null && typeof result === "object" && typeof result.then === "function") {
    result.then(done, (e) => { error = e; state = "rejected"; });
  } else done(result);
  return verdict;
})`;
}

interface ErrorShape {
  name?: string;
  message?: string;
}

/** Classifies an exception value thrown inside QuickJS. */
function guestError(context: QuickJSContext, handle: QuickJSHandle, phase: "parse" | "run"): SandboxOutcome {
  let dumped: unknown;
  try {
    dumped = context.dump(handle);
  } catch {
    dumped = undefined;
  }
  const shape: ErrorShape =
    typeof dumped === "object" && dumped !== null ? (dumped as ErrorShape) : { message: String(dumped) };
  const name = shape.name ?? "Error";
  const message = shape.message ?? "";
  if (/out of memory|string too long/i.test(message))
    return failure("memory", "transformation exceeded its memory limit");
  if (/stack overflow|call stack/i.test(message)) return failure("stack", "transformation exceeded its stack limit");
  if (phase === "parse" && name === "SyntaxError")
    return failure("syntax", `function source does not parse: ${truncate(`${name}: ${message}`)}`);
  return failure("runtime", `transformation raised an error: ${truncate(`${name}: ${message}`)}`);
}

/** Whether the source declares `name` at its top level, as a function or a binding holding one. */
export function declaresJavaScriptFunction(source: string, name: string): boolean {
  const escaped = name.replace(/\$/g, "\\$");
  return new RegExp(`(^|[^\\w$.])(function\\s*\\*?\\s*${escaped}\\s*\\(|(const|let|var)\\s+${escaped}\\s*=)`).test(
    source,
  );
}

const PAGE = 64 * 1024;
/** The loader's initial memory (emscripten's INITIAL_MEMORY, 16 MiB). */
const INITIAL_PAGES = (16 * 1024 * 1024) / PAGE;

/** The handle a guest call produced, or the outcome of what it threw (then disposed). */
function settled(
  context: QuickJSContext,
  result: DisposableResult<QuickJSHandle, QuickJSHandle>,
  phase: "parse" | "run",
): QuickJSHandle | SandboxOutcome {
  if (!result.error) return result.value;
  const outcome = guestError(context, result.error, phase);
  result.error.dispose();
  return outcome;
}

const isOutcome = (value: QuickJSHandle | SandboxOutcome): value is SandboxOutcome =>
  "ok" in value && typeof value.ok === "boolean";

/** Compiles without running: syntax errors and a missing top-level declaration. */
function check(context: QuickJSContext, task: SandboxTask): SandboxOutcome {
  const compiled = settled(context, context.evalCode(task.source, "transformation.js", { compileOnly: true }), "parse");
  if (isOutcome(compiled))
    return compiled.ok || compiled.failure !== "runtime"
      ? compiled
      : failure("syntax", compiled.message.replace("transformation raised an error", "function source does not parse"));
  compiled.dispose();
  if (!declaresJavaScriptFunction(task.source, task.functionName))
    return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
  return { ok: true, outputJson: null };
}

/** Loads the source after the guest console, calls the function through the harness, reads the verdict and the logs. */
function run(context: QuickJSContext, runtime: QuickJSRuntime, task: SandboxRunTask): SandboxOutcome {
  const drain = settled(context, context.evalCode(CONSOLE, "console.js"), "run");
  if (isOutcome(drain)) return drain;
  try {
    const loaded = settled(context, context.evalCode(task.source, "transformation.js"), "parse");
    if (isOutcome(loaded)) return loaded;
    loaded.dispose();
    const start = settled(
      context,
      context.evalCode(harness(task.functionName, task.limits.outputBytes), "harness.js"),
      "run",
    );
    if (isOutcome(start)) return start;
    const inputs = context.newString(task.inputsJson);
    const called = settled(context, context.callFunction(start, context.undefined, inputs), "run");
    inputs.dispose();
    start.dispose();
    if (isOutcome(called)) return called;
    try {
      const jobs = runtime.executePendingJobs();
      if (jobs.error) {
        const outcome = guestError(context, jobs.error, "run");
        jobs.error.dispose();
        return outcome;
      }
      return verdict(context, called, task, drain);
    } finally {
      called.dispose();
    }
  } finally {
    drain.dispose();
  }
}

/** Asks the harness's verdict function one question; only strings (and the rejection, classified here) cross. */
function ask(context: QuickJSContext, verdictFn: QuickJSHandle, what: string): QuickJSHandle | SandboxOutcome {
  const question = context.newString(what);
  const answer = settled(context, context.callFunction(verdictFn, context.undefined, question), "run");
  question.dispose();
  return answer;
}

function readString(context: QuickJSContext, handle: QuickJSHandle | SandboxOutcome): string | SandboxOutcome {
  if (isOutcome(handle)) return handle;
  try {
    return context.typeof(handle) === "string"
      ? context.getString(handle)
      : failure("crashed", "transformation stopped the sandbox's interpreter");
  } finally {
    handle.dispose();
  }
}

function verdict(
  context: QuickJSContext,
  verdictFn: QuickJSHandle,
  task: SandboxRunTask,
  drain: QuickJSHandle,
): SandboxOutcome {
  const state = readString(context, ask(context, verdictFn, "state"));
  if (typeof state !== "string") return state;
  switch (state) {
    case "ok": {
      const text = readString(context, ask(context, verdictFn, "out"));
      if (typeof text !== "string") return text;
      if (text.length > task.limits.outputBytes)
        return failure("output_too_large", `transformation output exceeds ${task.limits.outputBytes} bytes`);
      return succeeded(text, guestLog(context, drain));
    }
    case "too_large":
      return failure("output_too_large", `transformation output exceeds ${task.limits.outputBytes} bytes`);
    case "missing":
      return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
    case "not_object":
    case "not_json":
      return failure("not_json", "transformation must return a JSON object");
    case "rejected": {
      const error = ask(context, verdictFn, "error");
      if (isOutcome(error)) return error;
      const outcome = guestError(context, error, "run");
      error.dispose();
      return outcome;
    }
    default:
      return failure("runtime", "transformation returned a promise that never settled");
  }
}

/** The guest console's lines, read once as JSON text and put through RunLog (the host's caps hold whatever the guest did). */
function guestLog(context: QuickJSContext, drain: QuickJSHandle): RunLog {
  const log = new RunLog();
  const text = readString(context, settled(context, context.callFunction(drain, context.undefined), "run"));
  let parsed: unknown;
  try {
    parsed = typeof text === "string" && text.length <= LOG_MAX_BYTES * 8 ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const shape = parsed as { lines?: unknown; dropped?: unknown } | undefined;
  if (!shape || !Array.isArray(shape.lines)) {
    log.drop();
    return log;
  }
  for (const line of shape.lines) if (typeof line === "string") log.line(line);
  if (shape.dropped === true) log.drop();
  return log;
}

/** One call: a fresh QuickJS instance (and so a fresh heap, realm and fuel counter), dropped afterwards. */
export async function runJavaScript(task: SandboxTask, wasm: WebAssembly.Module): Promise<SandboxOutcome> {
  let fuel: FuelExports | undefined;
  const variant = newVariant(releaseSync, {
    // QuickJS's own limit counts its allocations, not the wasm memory, which emscripten grows
    // by up to 96 MiB at a time: a typed-array flood grew it to 2 GiB. The memory is capped at
    // the limit plus the loader's initial 16 MiB (stack and static data), so growth past it fails
    // and QuickJS raises its out-of-memory error.
    wasmMemory: new WebAssembly.Memory({
      initial: INITIAL_PAGES,
      maximum: INITIAL_PAGES + Math.ceil(task.limits.memoryBytes / PAGE),
    }),
    emscriptenModule: {
      instantiateWasm(
        imports: WebAssembly.Imports,
        onSuccess: (instance: WebAssembly.Instance) => void,
      ): WebAssembly.Exports {
        // QuickJS's imports are emscripten's runtime (clock, heap growth) and quickjs-emscripten's
        // dispatchers to host functions, of which none is ever registered: each call costs the
        // same, plus the heap growth it caused (QuickJS has no output or file import it can reach).
        const instance = new WebAssembly.Instance(
          wasm,
          meterImports(
            wasm,
            imports,
            () => fuel,
            () => ({}),
          ),
        );
        fuel = instance.exports as unknown as FuelExports;
        fuel.loom_set_fuel(SETUP_FUEL);
        onSuccess(instance);
        return instance.exports;
      },
    },
  });
  const quickjs = await newQuickJSWASMModuleFromVariant(variant);
  const runtime = quickjs.newRuntime();
  runtime.setMemoryLimit(task.limits.memoryBytes);
  runtime.setMaxStackSize(task.limits.stackBytes);
  const context = runtime.newContext();
  let clean = false;
  try {
    fuel?.loom_set_fuel(task.limits.fuel);
    const outcome = task.kind === "check" ? check(context, task) : run(context, runtime, task);
    clean = true;
    return outcome;
  } catch (error) {
    return hostFault(error, fuel);
  } finally {
    // After a trap the interpreter's heap may be inconsistent: drop it without touching it.
    if (clean) {
      context.dispose();
      runtime.dispose();
    }
  }
}
