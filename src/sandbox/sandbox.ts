import type { Env } from "../env";
import quickjs from "./generated/quickjs.wasm";
import micropython from "./generated/micropython.wasm";
import { GUEST_MAIN_MODULE, GUEST_VERSION } from "./generated/guest-bundle";
import { runTask } from "./engine";
import { failure, type SandboxLimits, type SandboxOutcome, type SandboxTask } from "./sandbox.types";

export type { SandboxLanguage, SandboxLimits, SandboxOutcome, SandboxTask } from "./sandbox.types";

/**
 * Default limits. Fuel is counted in the interpreter's own function entries and loop
 * iterations (about 100 million a second on one core), so it bounds work, not wall time.
 */
export const DEFAULT_LIMITS: SandboxLimits = {
  fuel: 30_000_000,
  memoryBytes: 32 * 1024 * 1024,
  stackBytes: 256 * 1024,
  outputBytes: 1024 * 1024,
};

/** Deployment overrides (vars), each bounded so a typo cannot lift a limit entirely. */
export function sandboxLimits(env: Env): SandboxLimits {
  const pick = (value: string | undefined, fallback: number, max: number): number => {
    const n = Number(value);
    return value !== undefined && Number.isInteger(n) && n > 0 ? Math.min(n, max) : fallback;
  };
  return {
    fuel: pick(env.SANDBOX_FUEL, DEFAULT_LIMITS.fuel, 2_000_000_000),
    memoryBytes: pick(env.SANDBOX_MEMORY_BYTES, DEFAULT_LIMITS.memoryBytes, 256 * 1024 * 1024),
    stackBytes: DEFAULT_LIMITS.stackBytes,
    outputBytes: pick(env.SANDBOX_OUTPUT_BYTES, DEFAULT_LIMITS.outputBytes, 8 * 1024 * 1024),
  };
}

/** Where tasks run: "loader" (a Dynamic Worker) when the deployment has one, else "inline" (this Worker). */
export function sandboxPlacement(env: Env): "loader" | "inline" {
  return env.LOADER && env.SANDBOX_PLACEMENT !== "inline" ? "loader" : "inline";
}

/**
 * Runs one task in a fresh interpreter. With a Worker Loader the interpreter lives in a
 * Dynamic Worker that has no bindings and no network; the isolate is reused across calls
 * (its id names the build), the interpreter never is.
 */
export async function runSandboxed(env: Env, task: SandboxTask): Promise<SandboxOutcome> {
  const loader = env.LOADER;
  if (!loader || sandboxPlacement(env) === "inline") return runTask(task, { quickjs, micropython });
  try {
    const worker = loader.get(`loom-sandbox-${GUEST_VERSION}`, () => ({
      compatibilityDate: "2026-11-01",
      mainModule: "guest.js",
      modules: { "guest.js": GUEST_MAIN_MODULE, "quickjs.wasm": quickjs, "micropython.wasm": micropython },
      env: {},
      globalOutbound: null,
    }));
    const response = await worker.getEntrypoint().fetch("http://sandbox/run", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(task) });
    if (!response.ok) return failure("crashed", "transformation stopped the sandbox's interpreter");
    return (await response.json()) as SandboxOutcome;
  } catch (error) {
    console.error("sandbox worker failed", error);
    return failure("crashed", "transformation stopped the sandbox's interpreter");
  }
}
