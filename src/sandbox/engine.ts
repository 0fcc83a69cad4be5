import { runPython } from "./micropython-engine";
import { runJavaScript } from "./quickjs-engine";
import { failure, type SandboxOutcome, type SandboxTask, type SandboxWasm } from "./sandbox.types";

// One interpreter at a time per isolate. MicroPython's loader keeps its state in globals
// (globalThis.Module and the proxy tables), so two of them must never be alive at once; and
// each interpreter may take its full memory cap, so running them one after another bounds
// the isolate's memory by one cap rather than by the number of concurrent requests.
let turn: Promise<unknown> = Promise.resolve();

/** Runs one task in a fresh interpreter; the same code runs in the Dynamic Worker and, without a loader, in the Worker itself. */
export function runTask(task: SandboxTask, wasm: SandboxWasm): Promise<SandboxOutcome> {
  const mine = turn.then(() => runAlone(task, wasm));
  turn = mine.catch(() => undefined);
  return mine;
}

async function runAlone(task: SandboxTask, wasm: SandboxWasm): Promise<SandboxOutcome> {
  try {
    return task.language === "javascript" ? await runJavaScript(task, wasm.quickjs) : await runPython(task, wasm.micropython);
  } catch (error) {
    console.error("sandbox engine failed", error);
    return failure("crashed", "transformation stopped the sandbox's interpreter");
  }
}
