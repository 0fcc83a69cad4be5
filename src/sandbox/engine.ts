import { runPython } from "./micropython-engine";
import { runJavaScript } from "./quickjs-engine";
import { failure, type SandboxOutcome, type SandboxTask, type SandboxWasm } from "./sandbox.types";

/** Runs one task in a fresh interpreter; the same code runs in the Dynamic Worker and, without a loader, in the Worker itself. */
export async function runTask(task: SandboxTask, wasm: SandboxWasm): Promise<SandboxOutcome> {
  try {
    return task.language === "javascript" ? await runJavaScript(task, wasm.quickjs) : await runPython(task, wasm.micropython);
  } catch (error) {
    console.error("sandbox engine failed", error);
    return failure("crashed", "transformation stopped the sandbox's interpreter");
  }
}
