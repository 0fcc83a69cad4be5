import { guarded } from "./guest-entry";
import { runPython } from "./micropython-engine";
import { runJavaScript } from "./quickjs-engine";
import type { SandboxOutcome, SandboxTask, SandboxWasm } from "./sandbox.types";

// One interpreter at a time per isolate. MicroPython's loader keeps its state in globals
// (globalThis.Module and the proxy tables), so two of them must never be alive at once; and
// each interpreter may take its full memory cap, so running them one after another bounds
// the isolate's memory by one cap rather than by the number of concurrent requests. (A run's
// Dynamic Worker holds one task, so only inline placement ever queues here.)
let turn: Promise<unknown> = Promise.resolve();

/** Runs one task in a fresh interpreter inside this isolate (inline placement). */
export function runTask(task: SandboxTask, wasm: SandboxWasm): Promise<SandboxOutcome> {
  const mine = turn.then(() =>
    guarded(() =>
      task.language === "javascript" ? runJavaScript(task, wasm.quickjs) : runPython(task, wasm.micropython),
    ),
  );
  turn = mine.catch(() => undefined);
  return mine;
}
