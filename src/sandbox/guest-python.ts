// The main module of a Python run's Dynamic Worker (bundled by scripts/meter-wasm.mjs).
import micropython from "./generated/micropython.wasm";
import { serveTasks } from "./guest-entry";
import { runPython } from "./micropython-engine";

export default serveTasks("python", (task) => runPython(task, micropython));
