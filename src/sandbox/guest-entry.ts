// What a run's Dynamic Worker serves: it has no bindings and no network (globalOutbound null),
// holds one interpreter, receives one task as JSON and answers its outcome as JSON.
import { failure, type SandboxLanguage, type SandboxOutcome, type SandboxTask } from "./sandbox.types";

/** Any host-side failure of an engine is the run's "crashed" outcome, never an exception out of the sandbox. */
export async function guarded(run: () => Promise<SandboxOutcome>): Promise<SandboxOutcome> {
  try {
    return await run();
  } catch (error) {
    console.error("sandbox engine failed", error);
    return failure("crashed", "transformation stopped the sandbox's interpreter");
  }
}

/**
 * The intrinsics a guest isolate freezes before it serves anything. An organization's isolate
 * lives across its runs; guest code has no bridge to JavaScript (see micropython-imports.ts and
 * quickjs-engine.ts), and frozen intrinsics make sure that, even if one were found, nothing
 * planted on a prototype or constructor could reach a later run.
 */
const INTRINSICS: readonly unknown[] = [
  Object,
  Function,
  Array,
  String,
  Number,
  Boolean,
  Symbol,
  BigInt,
  Math,
  JSON,
  Reflect,
  Date,
  RegExp,
  Promise,
  Map,
  Set,
  WeakMap,
  WeakSet,
  WeakRef,
  ArrayBuffer,
  DataView,
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  AggregateError,
  Atomics,
  Proxy,
  WebAssembly,
  WebAssembly.Module,
  WebAssembly.Instance,
  WebAssembly.Memory,
  WebAssembly.Table,
  WebAssembly.Global,
  Uint8Array,
  Int8Array,
  Uint8ClampedArray,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  TextEncoder,
  TextDecoder,
  Response,
  Request,
  Headers,
  Object.getPrototypeOf(Uint8Array),
  Object.getPrototypeOf(function* () {}),
  Object.getPrototypeOf(async () => {}),
];

/**
 * Properties code commonly assigns on its own objects (`error.name = ...`, `obj.toString = ...`).
 * Frozen on a prototype, such an assignment would throw (the "override mistake"), so they
 * become accessors that write an own property on the object assigned to, never the prototype.
 */
const OVERRIDABLE = ["constructor", "name", "message", "toString", "valueOf", "toLocaleString", "toJSON"];

function tameOverrides(prototype: object): void {
  for (const key of OVERRIDABLE) {
    const descriptor = Object.getOwnPropertyDescriptor(prototype, key);
    if (!descriptor || !("value" in descriptor) || !descriptor.writable || !descriptor.configurable) continue;
    const value: unknown = descriptor.value;
    Object.defineProperty(prototype, key, {
      get: () => value,
      set(this: object, next: unknown) {
        if (this === prototype) throw new TypeError(`cannot assign ${key} of a frozen prototype`);
        Object.defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
      },
      enumerable: descriptor.enumerable,
      configurable: false,
    });
  }
}

/** Freezes each intrinsic and its prototype (idempotent). */
export function freezeIntrinsics(): void {
  for (const intrinsic of INTRINSICS) {
    if ((typeof intrinsic !== "object" && typeof intrinsic !== "function") || intrinsic === null) continue;
    if (Object.isFrozen(intrinsic)) continue;
    const prototype = (intrinsic as { prototype?: unknown }).prototype;
    if (typeof prototype === "object" && prototype !== null) {
      tameOverrides(prototype);
      Object.freeze(prototype);
    }
    Object.freeze(intrinsic);
  }
}

/**
 * The fetch handler of a guest for one language. One task at a time: the interpreter's loader
 * keeps state in globals (see engine.ts), and each interpreter may take its full memory cap.
 */
export function serveTasks(
  language: SandboxLanguage,
  run: (task: SandboxTask) => Promise<SandboxOutcome>,
): ExportedHandler {
  freezeIntrinsics();
  let turn: Promise<unknown> = Promise.resolve();
  return {
    async fetch(request: Request): Promise<Response> {
      const task = (await request.json()) as SandboxTask;
      const mine = turn.then(() =>
        task.language === language
          ? guarded(() => run(task))
          : failure("crashed", "transformation stopped the sandbox's interpreter"),
      );
      turn = mine.catch(() => undefined);
      return Response.json(await mine);
    },
  };
}
