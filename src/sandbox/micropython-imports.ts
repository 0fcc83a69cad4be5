import { FilesTooLarge, HOST_BYTE_FUEL, iovecBytes, meterImports, type ImportRule } from "./host-calls";
import type { FuelExports, RunLog } from "./sandbox.types";

/**
 * What MicroPython's wasm may call in the host: emscripten's runtime (setjmp trampolines,
 * clock, random numbers, its in-memory file system, heap growth, abort). Everything else it
 * imports is the JavaScript FFI of the webassembly port (attribute reads and writes, calls,
 * `new`, iteration, promises, jsffi.to_js / create_proxy ...), which reads, calls or creates
 * host objects: refused, and so is any import a later MicroPython adds.
 */
const RUNTIME_IMPORTS = new Set([
  "mp_js_random_u32",
  "mp_js_ticks_ms",
  "mp_js_time_ms",
  "fd_close",
  "fd_sync",
  "fd_seek",
  "fd_read",
  "fd_write",
  "_abort_js",
  "emscripten_resize_heap",
  "_emscripten_throw_longjmp",
  "proxy_js_free_obj",
]);

export interface MicroPythonHost {
  fuel: () => FuelExports | undefined;
  memory: () => WebAssembly.Memory;
  /** Receives stdout while the user's code runs; undefined while compiling. */
  stdout: () => RunLog | undefined;
  /** The heap cap; the in-memory files count against it too. */
  memoryBytes: number;
}

type Fn = (...args: number[]) => number;

/** The metered, closed set of imports one MicroPython instance is given. */
export function micropythonImports(
  wasm: WebAssembly.Module,
  imports: WebAssembly.Imports,
  host: MicroPythonHost,
): WebAssembly.Imports {
  const env = imports.env as Record<string, Fn>;
  const writeFile = imports.wasi_snapshot_preview1?.fd_write as Fn;
  let fileBytes = 0;
  const bytesOf = ([, iovs, count]: number[]) => iovecBytes(host.memory(), iovs, count) * HOST_BYTE_FUEL;

  // stdout and stderr never reach emscripten's per-byte TTY path: stdout goes to the run's
  // log as whole chunks (the log stops copying at its cap), stderr is dropped.
  const fdWrite: Fn = (fd, iovs, count, written) => {
    const memory = host.memory();
    const words = new Uint32Array(memory.buffer);
    if (fd !== 1 && fd !== 2) {
      fileBytes += iovecBytes(memory, iovs, count);
      if (fileBytes > host.memoryBytes) throw new FilesTooLarge();
      return writeFile(fd, iovs, count, written);
    }
    const log = fd === 1 ? host.stdout() : undefined;
    let total = 0;
    for (let i = 0; i < count; i++) {
      const pointer = words[((iovs >>> 0) + 8 * i) >>> 2];
      const length = words[((iovs >>> 0) + 8 * i + 4) >>> 2];
      log?.write(new Uint8Array(memory.buffer, pointer, length));
      total += length;
    }
    words[(written >>> 0) >>> 2] = total;
    return 0;
  };

  const grow = env.emscripten_resize_heap;
  // Refusing growth makes malloc fail, which MicroPython reports as MemoryError.
  const resizeHeap: Fn = (bytes) => (bytes >>> 0 > host.memoryBytes ? 0 : grow(bytes));

  const rule = (name: string): ImportRule => {
    if (!RUNTIME_IMPORTS.has(name) && !name.startsWith("invoke_") && !name.startsWith("__syscall_"))
      return { refuse: true };
    switch (name) {
      case "fd_write":
        return { cost: bytesOf, replace: fdWrite };
      case "fd_read":
        return { cost: bytesOf };
      case "emscripten_resize_heap":
        return { replace: resizeHeap }; // the growth is charged by meterImports once it happened
      case "proxy_js_free_obj":
        // Frees a slot of the host's object table, which no guest ever fills (see the loader patch).
        return { replace: () => 0 };
      default:
        return {};
    }
  };
  return meterImports(wasm, imports, host.fuel, rule, host.memory);
}
