import type { FuelExports } from "./sandbox.types";

/**
 * Fuel every call from an interpreter out to the host spends, whatever it does. A busy wait on
 * the clock spends most of its time in such calls, which the counter inside the wasm sees only
 * as one function entry each.
 */
export const HOST_CALL_FUEL = 1000;

/** Fuel per byte a call moves across the boundary (output written, a file read or written). */
export const HOST_BYTE_FUEL = 1;

/** Fuel per 64 bytes of heap growth the host is asked for (growing the heap is work the host does). */
export const HOST_HEAP_FUEL_PER_64_BYTES = 1;

/** The interpreter's budget ran out inside a call to the host: the call's work was not done. */
export class FuelSpent extends Error {
  constructor() {
    super("transformation exceeded its instruction budget");
  }
}

/** The interpreter wrote more to its in-memory files than its heap may hold (files live in host memory). */
export class FilesTooLarge extends Error {
  constructor() {
    super("transformation exceeded its memory limit");
  }
}

/** The interpreter reached for something the sandbox does not offer (a bridge to host objects). */
export class HostRefused extends Error {
  constructor(what: string) {
    super(`the sandbox has no bridge to the host (${what})`);
  }
}

type HostFunction = (...args: number[]) => unknown;

/** What one imported function may do: run at HOST_CALL_FUEL plus `cost(args)`, possibly replaced; or be refused. */
export type ImportRule =
  | { refuse: true }
  | { refuse?: false; cost?: (args: number[]) => number; replace?: HostFunction };

/** Lowers the counter by `units` before the work is done; throws FuelSpent (and does nothing) once it is below zero. */
function spend(fuel: FuelExports, units: number): void {
  const left = fuel.loom_get_fuel() - units;
  fuel.loom_set_fuel(Math.max(left, -1));
  if (left < 0) throw new FuelSpent();
}

/**
 * The imports an interpreter's wasm is given: exactly the functions it declares (nothing else
 * of the loader's import object), each charged by `rule` before it runs, or refused. Heap
 * growth is charged after any call that grew the memory (whatever the import's name, so the
 * minified QuickJS loader's is covered too); the growth itself is bounded by the heap cap.
 * `memory` is the instance's memory when the module exports rather than imports it. The
 * counter is read once the instance exists.
 */
export function meterImports(
  wasm: WebAssembly.Module,
  imports: WebAssembly.Imports,
  fuel: () => FuelExports | undefined,
  rule: (name: string) => ImportRule,
  exportedMemory: () => WebAssembly.Memory | undefined = () => undefined,
): WebAssembly.Imports {
  const metered: Record<string, Record<string, WebAssembly.ImportValue>> = {};
  let importedMemory: WebAssembly.Memory | undefined;
  const memory = () => importedMemory ?? exportedMemory();
  for (const { module: space, name, kind } of WebAssembly.Module.imports(wasm)) {
    const value = imports[space]?.[name];
    if (value === undefined) throw new Error(`sandbox: the loader offers no import ${space}.${name}`);
    metered[space] ??= {};
    if (kind !== "function") {
      if (kind === "memory") importedMemory = value as WebAssembly.Memory;
      metered[space][name] = value;
      continue;
    }
    const chosen = rule(name);
    if (chosen.refuse) {
      metered[space][name] = () => {
        throw new HostRefused(name);
      };
      continue;
    }
    const run = chosen.replace ?? (value as HostFunction);
    const cost = chosen.cost;
    metered[space][name] = (...args: number[]) => {
      const counter = fuel(); // undefined during the interpreter's own start-up: free, and its memory may not exist yet
      if (!counter) return run(...args);
      spend(counter, HOST_CALL_FUEL + (cost ? cost(args) : 0));
      const before = memory()?.buffer.byteLength ?? 0;
      const result = run(...args);
      const grown = (memory()?.buffer.byteLength ?? 0) - before;
      if (grown > 0) spend(counter, (grown / 64) * HOST_HEAP_FUEL_PER_64_BYTES);
      return result;
    };
  }
  return metered;
}

/** Most iovecs one write may name; the interpreters' own writes use one or two. */
const MAX_IOVECS = 1024;

/** Total length of a WASI iovec list (`count` pairs of pointer and length at `iovs`); past MAX_IOVECS, more than any budget. */
export function iovecBytes(memory: WebAssembly.Memory, iovs: number, count: number): number {
  if (count >>> 0 > MAX_IOVECS) return Number.POSITIVE_INFINITY;
  const words = new Uint32Array(memory.buffer);
  let total = 0;
  for (let i = 0; i < count; i++) total += words[((iovs >>> 0) + 8 * i + 4) >>> 2];
  return total;
}
