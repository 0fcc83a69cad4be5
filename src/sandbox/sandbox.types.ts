/** What the sandbox runs, and what it answers. Plain JSON both ways, so it crosses the Worker Loader boundary as is. */
export type SandboxLanguage = "javascript" | "python";

export interface SandboxLimits {
  /** Fuel units: one is spent at every function entry and loop header inside the interpreter's wasm. */
  fuel: number;
  /** The interpreter's heap may not grow past this many bytes. */
  memoryBytes: number;
  /** Deepest stack the interpreter allows (QuickJS: bytes of C stack; MicroPython: words of Python stack). */
  stackBytes: number;
  /** The serialized result may be at most this many bytes. */
  outputBytes: number;
}

export interface SandboxCheckTask {
  kind: "check";
  language: SandboxLanguage;
  source: string;
  functionName: string;
  limits: SandboxLimits;
}

export interface SandboxRunTask {
  kind: "run";
  language: SandboxLanguage;
  source: string;
  functionName: string;
  /** The inputs as JSON text: the function receives the parsed object. */
  inputsJson: string;
  limits: SandboxLimits;
}

export type SandboxTask = SandboxCheckTask | SandboxRunTask;

export type SandboxFailure =
  | "syntax"
  | "missing_function"
  | "fuel"
  | "memory"
  | "stack"
  | "output_too_large"
  | "not_json"
  | "runtime"
  | "crashed";

/** `logs`: what the function printed (`console.*` in JavaScript, `print` in Python), bounded by RunLog. */
export type SandboxOutcome = { ok: true; outputJson: string | null; logs?: string[] } | { ok: false; failure: SandboxFailure; message: string };

/** Lines of printed output a run keeps, and the bytes of text they may hold together; a line is cut at LOG_LINE_BYTES. */
export const LOG_MAX_LINES = 100;
export const LOG_MAX_BYTES = 16_384;
export const LOG_LINE_BYTES = 1_000;

/**
 * The printed output of one run, kept within LOG_MAX_LINES lines and LOG_MAX_BYTES bytes (what is
 * past the cap is dropped as it comes, so a print loop cannot pile it up; fuel still bounds the
 * loop). A last line says when something was dropped.
 */
export class RunLog {
  private readonly kept: string[] = [];
  private bytes = 0;
  private dropped = false;
  private pending: number[] = [];
  private readonly decoder = new TextDecoder();

  /** One whole line (JavaScript's console). */
  line(text: string): void {
    if (this.kept.length >= LOG_MAX_LINES || this.bytes >= LOG_MAX_BYTES) {
      this.dropped = true;
      return;
    }
    const cut = text.length > LOG_LINE_BYTES ? `${text.slice(0, LOG_LINE_BYTES)}...` : text;
    this.kept.push(cut);
    this.bytes += cut.length;
  }

  /** One byte of a stream (Python's stdout); lines end at "\n". */
  byte(value: number): void {
    if (value === 10) {
      this.flush();
      return;
    }
    if (this.kept.length >= LOG_MAX_LINES || this.bytes >= LOG_MAX_BYTES) this.dropped = true;
    else if (this.pending.length <= LOG_LINE_BYTES) this.pending.push(value);
  }

  private flush(): void {
    const bytes = this.pending;
    this.pending = [];
    this.line(this.decoder.decode(new Uint8Array(bytes)));
  }

  lines(): string[] {
    if (this.pending.length) this.flush();
    return this.dropped ? [...this.kept, `[more output dropped: a run keeps ${LOG_MAX_LINES} lines, ${LOG_MAX_BYTES} bytes]`] : [...this.kept];
  }
}

/** An ok outcome, with the run's printed lines when there are any. */
export function succeeded(outputJson: string | null, log?: RunLog): SandboxOutcome {
  const logs = log?.lines() ?? [];
  return logs.length ? { ok: true, outputJson, logs } : { ok: true, outputJson };
}

/** The two exports the build step adds to each interpreter's wasm. */
export interface FuelExports {
  loom_set_fuel(units: number): void;
  loom_get_fuel(): number;
}

export interface SandboxWasm {
  quickjs: WebAssembly.Module;
  micropython: WebAssembly.Module;
}

/** Generous fuel for an interpreter's own start-up, before the user's budget is set. */
export const SETUP_FUEL = 200_000_000;

export function failure(kind: SandboxFailure, message: string): SandboxOutcome {
  return { ok: false, failure: kind, message };
}

/**
 * Fuel charged for every call from the interpreter out to the host (clock, output, heap growth).
 * A busy wait on the clock or a print loop spends most of its time in such calls, which the
 * counter inside the wasm sees only as one function entry each.
 */
export const HOST_CALL_FUEL = 1000;

/** Wraps every imported function so each call spends HOST_CALL_FUEL; the counter is read once the instance exists. */
export function chargeHostCalls(imports: WebAssembly.Imports, fuel: () => FuelExports | undefined): WebAssembly.Imports {
  const charged: WebAssembly.Imports = {};
  for (const [space, members] of Object.entries(imports)) {
    const wrapped: Record<string, WebAssembly.ImportValue> = {};
    for (const [name, value] of Object.entries(members)) {
      if (typeof value !== "function") {
        wrapped[name] = value;
        continue;
      }
      const original = value as (...args: unknown[]) => unknown;
      wrapped[name] = (...args: unknown[]) => {
        const counter = fuel();
        if (counter) counter.loom_set_fuel(counter.loom_get_fuel() - HOST_CALL_FUEL);
        return original(...args);
      };
    }
    charged[space] = wrapped;
  }
  return charged;
}

/** A wasm trap after the counter went below zero is fuel exhaustion, whatever the host error says. */
export function fuelSpent(exports: FuelExports | undefined): boolean {
  try {
    return exports !== undefined && exports.loom_get_fuel() < 0;
  } catch {
    return false;
  }
}

/** Maps an error thrown out of the interpreter's wasm (a trap, a host stack overflow) to an outcome. */
export function hostFault(error: unknown, exports: FuelExports | undefined): SandboxOutcome {
  if (fuelSpent(exports)) return failure("fuel", "transformation exceeded its instruction budget");
  if (error instanceof RangeError && /call stack/i.test(error.message)) return failure("stack", "transformation exceeded its stack limit");
  if (error instanceof WebAssembly.RuntimeError && /memory|out of bounds/i.test(error.message)) return failure("memory", "transformation exceeded its memory limit");
  return failure("crashed", "transformation stopped the sandbox's interpreter");
}

export function truncate(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
