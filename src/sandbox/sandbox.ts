import type { Env } from "../env";
import quickjs from "./generated/quickjs.wasm";
import micropython from "./generated/micropython.wasm";
import { GUEST_JAVASCRIPT, GUEST_PYTHON, GUEST_VERSION } from "./generated/guest-bundle";
import { runTask } from "./engine";
import { failure, type SandboxLimits, type SandboxOutcome, type SandboxTask } from "./sandbox.types";
import { causeChain, logEvent } from "../lib/log";

export type { SandboxLanguage, SandboxLimits, SandboxOutcome, SandboxTask } from "./sandbox.types";

/**
 * Default limits. Fuel is counted in the interpreter's own function entries and loop
 * iterations (about 100 million a second on one core), so it bounds work; the timeout bounds
 * the wall time of a run in a Dynamic Worker whatever it spends it on.
 */
export const DEFAULT_LIMITS: SandboxLimits = {
  fuel: 30_000_000,
  memoryBytes: 32 * 1024 * 1024,
  stackBytes: 256 * 1024,
  outputBytes: 1024 * 1024,
  timeoutMs: 10_000,
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
    timeoutMs: pick(env.SANDBOX_TIMEOUT_MS, DEFAULT_LIMITS.timeoutMs, 60_000),
  };
}

/**
 * Where tasks run: "loader" (a fresh Dynamic Worker per run) when the deployment binds a
 * loader; "inline" (this Worker's own isolate) only when SANDBOX_PLACEMENT=inline says so,
 * which is for single-tenant deployments: runs then share the API Worker's realm (with no
 * bridge to it) and its queue, and no wall-clock bound can interrupt them. Without either,
 * "none": transformations are refused rather than silently run inline.
 */
export function sandboxPlacement(env: Env): "loader" | "inline" | "none" {
  if (env.SANDBOX_PLACEMENT === "inline") return "inline";
  return env.LOADER ? "loader" : "none";
}

export const NO_PLACEMENT =
  "transformations are not available: this deployment has no Dynamic Worker loader (binding LOADER); SANDBOX_PLACEMENT=inline runs them inside the API Worker, for single-tenant deployments only";

/**
 * Runs one task in a fresh interpreter, where sandboxPlacement says. `tenant` (the organization)
 * names the Dynamic Worker: organizations never share an isolate, a realm or a queue.
 */
export function runSandboxed(env: Env, task: SandboxTask, tenant: string): Promise<SandboxOutcome> {
  const placement = sandboxPlacement(env);
  if (placement === "inline") return runTask(task, { quickjs, micropython });
  if (placement === "none" || !env.LOADER) return Promise.resolve(failure("unavailable", NO_PLACEMENT));
  return runInDynamicWorker(env.LOADER, task, tenant);
}

const crashed = () => failure("crashed", "transformation stopped the sandbox's interpreter");

/**
 * Each organization's runs go to a Dynamic Worker of its own (`get` by an id naming the build,
 * the language, the organization and the time limit), so no run shares an isolate, a realm or
 * a queue with another organization's. Within it, every run gets a fresh interpreter; the
 * guest freezes its intrinsics before serving (guest-entry.ts) and has no bridge to JavaScript,
 * so nothing one run does is there for the next. Loading a fresh isolate for every run would
 * compile the interpreter's wasm each time (+20 ms JavaScript, +50 ms Python at p50 here).
 * It has no bindings and no network, only the interpreter its language needs, and the run's
 * time limit as its CPU limit. The host bounds the wall time too: at the deadline it answers
 * the timeout and abandons the request. A guest that holds the thread (locally workerd runs
 * Dynamic Workers on the caller's thread) keeps the timer from firing, so the elapsed time is
 * checked again when the answer arrives; fuel and the CPU limit are what stop such a guest.
 */
async function runInDynamicWorker(loader: WorkerLoader, task: SandboxTask, tenant: string): Promise<SandboxOutcome> {
  const limit = task.limits.timeoutMs;
  const timedOut = failure("timeout", `transformation exceeded its time limit of ${limit} ms`);
  const started = Date.now();
  const abandon = new AbortController();
  let timer: ReturnType<typeof setTimeout> | null = null;
  const deadline = new Promise<"deadline">((resolve) => {
    timer = setTimeout(() => resolve("deadline"), limit);
  });
  const python = task.language === "python";
  try {
    const modules: Record<string, string | WebAssembly.Module> = python
      ? { "guest.js": GUEST_PYTHON, "micropython.wasm": micropython }
      : { "guest.js": GUEST_JAVASCRIPT, "quickjs.wasm": quickjs };
    const worker = loader.get(`loom-sandbox-${GUEST_VERSION}-${task.language}-${tenant}-${limit}`, () => ({
      compatibilityDate: "2026-11-01",
      mainModule: "guest.js",
      modules,
      env: {},
      globalOutbound: null,
      limits: { cpuMs: limit },
    }));
    const answer = worker
      .getEntrypoint()
      .fetch("http://sandbox/run", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(task),
        signal: abandon.signal,
      })
      .then(
        async (response): Promise<SandboxOutcome> =>
          response.ok ? ((await response.json()) as SandboxOutcome) : crashed(),
      );
    answer.catch(() => undefined); // after the deadline its rejection (abandoned) is expected
    const first = await Promise.race([answer, deadline]);
    if (first === "deadline" || Date.now() - started > limit) {
      abandon.abort();
      return timedOut;
    }
    return first;
  } catch (error) {
    // Past the deadline the platform's CPU limit may have ended the guest: that is the timeout too.
    if (Date.now() - started > limit) return timedOut;
    logEvent("error", "sandbox_worker_failed", { cause: causeChain(error) });
    return crashed();
  } finally {
    clearTimeout(timer);
  }
}
