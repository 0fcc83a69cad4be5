import { FilesTooLarge, FuelSpent, HostRefused } from "./host-calls";

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
  /** Wall-clock bound of a run in a Dynamic Worker, enforced by the host (and as the Worker's CPU limit). */
  timeoutMs: number;
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
  | "crashed"
  | "timeout"
  /** The deployment offers no placement for untrusted code (no loader, inline not chosen). */
  | "unavailable";

/** `logs`: what the function printed (`console.*` in JavaScript, `print` in Python), bounded by RunLog. */
export type SandboxOutcome =
  | { ok: true; outputJson: string | null; logs?: string[] }
  | { ok: false; failure: SandboxFailure; message: string };

/** Lines of printed output a run keeps, and the bytes of text they may hold together; a line is cut at LOG_LINE_BYTES. */
export const LOG_MAX_LINES = 100;
export const LOG_MAX_BYTES = 16_384;
export const LOG_LINE_BYTES = 1_000;

/**
 * The printed output of one run, kept within LOG_MAX_LINES lines and LOG_MAX_BYTES bytes. What
 * is past the cap is dropped as it comes, without being copied, so a print loop cannot pile it
 * up (fuel, charged per byte written, bounds the loop). A last line says when something was dropped.
 */
export class RunLog {
  private readonly kept: string[] = [];
  private bytes = 0;
  private dropped = false;
  /** The bytes of the current line, up to one past LOG_LINE_BYTES (the rest of a long line is skipped). */
  private pending = new Uint8Array(LOG_LINE_BYTES + 1);
  private pendingLength = 0;
  private readonly decoder = new TextDecoder();

  private full(): boolean {
    return this.kept.length >= LOG_MAX_LINES || this.bytes >= LOG_MAX_BYTES;
  }

  /** One whole line (JavaScript's console). */
  line(text: string): void {
    if (this.full()) {
      this.dropped = true;
      return;
    }
    const cut = text.length > LOG_LINE_BYTES ? `${text.slice(0, LOG_LINE_BYTES)}...` : text;
    this.kept.push(cut);
    this.bytes += cut.length;
  }

  /** Records that output was dropped before it reached this log (the guest keeps its own cap). */
  drop(): void {
    this.dropped = true;
  }

  /** A chunk of a byte stream (Python's stdout); lines end at "\n". Work is bounded by what is kept, not by the chunk. */
  write(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.full()) {
        this.dropped = true;
        return;
      }
      const newline = chunk.indexOf(10, at);
      const end = newline < 0 ? chunk.length : newline;
      const room = this.pending.length - this.pendingLength;
      const take = Math.min(room, end - at);
      this.pending.set(chunk.subarray(at, at + take), this.pendingLength);
      this.pendingLength += take;
      if (newline < 0) return;
      this.flush();
      at = newline + 1;
    }
  }

  private flush(): void {
    const text = this.decoder.decode(this.pending.subarray(0, this.pendingLength));
    this.pendingLength = 0;
    this.line(text);
  }

  lines(): string[] {
    if (this.pendingLength) this.flush();
    return this.dropped
      ? [...this.kept, `[more output dropped: a run keeps ${LOG_MAX_LINES} lines, ${LOG_MAX_BYTES} bytes]`]
      : [...this.kept];
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

/** A wasm trap after the counter went below zero is fuel exhaustion, whatever the host error says. */
export function fuelSpent(exports: FuelExports | undefined): boolean {
  try {
    return exports !== undefined && exports.loom_get_fuel() < 0;
  } catch {
    return false;
  }
}

/** The answer when guest code reached for a host object (only possible through a bridge the build left in). */
export const HOST_REFUSED = "transformation tried to reach the host, which the sandbox does not allow";

/** Maps an error thrown out of the interpreter's wasm (a trap, a host stack overflow, a refused import) to an outcome. */
export function hostFault(error: unknown, exports: FuelExports | undefined): SandboxOutcome {
  if (fuelSpent(exports) || error instanceof FuelSpent)
    return failure("fuel", "transformation exceeded its instruction budget");
  if (error instanceof HostRefused) return failure("runtime", HOST_REFUSED);
  if (error instanceof FilesTooLarge) return failure("memory", "transformation exceeded its memory limit");
  if (error instanceof RangeError && /call stack/i.test(error.message))
    return failure("stack", "transformation exceeded its stack limit");
  if (error instanceof WebAssembly.RuntimeError && /memory|out of bounds/i.test(error.message))
    return failure("memory", "transformation exceeded its memory limit");
  return failure("crashed", "transformation stopped the sandbox's interpreter");
}

export function truncate(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
