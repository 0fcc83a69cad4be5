import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSContext, type QuickJSHandle } from "quickjs-emscripten-core";
import releaseSync from "@jitl/quickjs-wasmfile-release-sync";
import { RunLog, SETUP_FUEL, chargeHostCalls, failure, hostFault, succeeded, truncate, type FuelExports, type SandboxOutcome, type SandboxTask } from "./sandbox.types";

/**
 * Runs after the user's script, as a second script, so the user's top-level declarations are
 * visible. It calls the function with the parsed inputs, awaits a returned promise, and leaves
 * its verdict in two globals the host reads; nothing but a string crosses back.
 */
function harness(functionName: string): string {
  return `(() => {
  const done = (value) => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) { globalThis.__loomState = "not_object"; return; }
    let text;
    try { text = JSON.stringify(value); } catch (e) { globalThis.__loomState = "not_json"; return; }
    if (typeof text !== "string") { globalThis.__loomState = "not_json"; return; }
    globalThis.__loomOut = text; globalThis.__loomState = "ok";
  };
  if (typeof ${functionName} !== "function") { globalThis.__loomState = "missing"; return; }
  globalThis.__loomState = "pending";
  const result = ${functionName}(JSON.parse(globalThis.__loomInputs));
  if (result !== null && typeof result === "object" && typeof result.then === "function") {
    result.then(done, (error) => { globalThis.__loomError = error; globalThis.__loomState = "rejected"; });
  } else done(result);
})();`;
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
  const shape: ErrorShape = typeof dumped === "object" && dumped !== null ? (dumped as ErrorShape) : { message: String(dumped) };
  const name = shape.name ?? "Error";
  const message = shape.message ?? "";
  if (/out of memory|string too long/i.test(message)) return failure("memory", "transformation exceeded its memory limit");
  if (/stack overflow|call stack/i.test(message)) return failure("stack", "transformation exceeded its stack limit");
  if (phase === "parse" && name === "SyntaxError") return failure("syntax", `function source does not parse: ${truncate(`${name}: ${message}`)}`);
  return failure("runtime", `transformation raised an error: ${truncate(`${name}: ${message}`)}`);
}

/** `console.log` and friends write one line each to the run's log: strings as they are, other values as JSON. */
function installConsole(context: QuickJSContext, log: RunLog): void {
  const console = context.newObject();
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    const write = context.newFunction(level, (...args: QuickJSHandle[]) => {
      const parts = args.map((arg) => {
        if (context.typeof(arg) === "string") return context.getString(arg);
        try {
          return JSON.stringify(context.dump(arg)) ?? String(context.dump(arg));
        } catch {
          return String(context.dump(arg));
        }
      });
      log.line(parts.join(" "));
    });
    context.setProp(console, level, write);
    write.dispose();
  }
  context.setProp(context.global, "console", console);
  console.dispose();
}

/** Whether the source declares `name` at its top level, as a function or a binding holding one. */
export function declaresJavaScriptFunction(source: string, name: string): boolean {
  const escaped = name.replace(/\$/g, "\\$");
  return new RegExp(`(^|[^\\w$.])(function\\s*\\*?\\s*${escaped}\\s*\\(|(const|let|var)\\s+${escaped}\\s*=)`).test(source);
}

/** One call: a fresh QuickJS instance (and so a fresh heap and fuel counter), dropped afterwards. */
export async function runJavaScript(task: SandboxTask, wasm: WebAssembly.Module): Promise<SandboxOutcome> {
  let fuel: FuelExports | undefined;
  const variant = newVariant(releaseSync, {
    emscriptenModule: {
      instantiateWasm(imports: WebAssembly.Imports, onSuccess: (instance: WebAssembly.Instance) => void): WebAssembly.Exports {
        const instance = new WebAssembly.Instance(wasm, chargeHostCalls(imports, () => fuel));
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
    if (task.kind === "check") {
      const compiled = context.evalCode(task.source, "transformation.js", { compileOnly: true });
      if (compiled.error) {
        const outcome = guestError(context, compiled.error, "parse");
        compiled.error.dispose();
        clean = true;
        return outcome.ok || outcome.failure !== "runtime" ? outcome : failure("syntax", outcome.message.replace("transformation raised an error", "function source does not parse"));
      }
      compiled.value.dispose();
      clean = true;
      if (!declaresJavaScriptFunction(task.source, task.functionName)) return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
      return { ok: true, outputJson: null };
    }

    const log = new RunLog();
    installConsole(context, log);
    const loaded = context.evalCode(task.source, "transformation.js");
    if (loaded.error) {
      const outcome = guestError(context, loaded.error, "parse");
      loaded.error.dispose();
      clean = true;
      return outcome;
    }
    loaded.value.dispose();
    const inputs = context.newString(task.inputsJson);
    context.setProp(context.global, "__loomInputs", inputs);
    inputs.dispose();
    const called = context.evalCode(harness(task.functionName), "harness.js");
    if (called.error) {
      const outcome = guestError(context, called.error, "run");
      called.error.dispose();
      clean = true;
      return outcome;
    }
    called.value.dispose();
    const jobs = runtime.executePendingJobs();
    if (jobs.error) {
      const outcome = guestError(context, jobs.error, "run");
      jobs.error.dispose();
      clean = true;
      return outcome;
    }
    const state = context.getProp(context.global, "__loomState").consume((h) => context.dump(h)) as unknown;
    clean = true;
    switch (state) {
      case "ok": {
        const text = context.getProp(context.global, "__loomOut").consume((h) => context.getString(h));
        if (text.length > task.limits.outputBytes) return failure("output_too_large", `transformation output exceeds ${task.limits.outputBytes} bytes`);
        return succeeded(text, log);
      }
      case "missing":
        return failure("missing_function", `function_name '${task.functionName}' is not defined in the function source`);
      case "not_object":
      case "not_json":
        return failure("not_json", "transformation must return a JSON object");
      case "rejected": {
        const handle = context.getProp(context.global, "__loomError");
        const outcome = guestError(context, handle, "run");
        handle.dispose();
        return outcome;
      }
      default:
        return failure("runtime", "transformation returned a promise that never settled");
    }
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
