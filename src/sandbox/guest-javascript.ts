// The main module of a JavaScript run's Dynamic Worker (bundled by scripts/meter-wasm.mjs).
import quickjs from "./generated/quickjs.wasm";
import { serveTasks } from "./guest-entry";
import { runJavaScript } from "./quickjs-engine";

export default serveTasks("javascript", (task) => runJavaScript(task, quickjs));
