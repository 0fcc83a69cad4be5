// The Dynamic Worker's main module: it has no bindings and no network (globalOutbound null);
// it receives one task as JSON and answers its outcome as JSON.
import quickjs from "./generated/quickjs.wasm";
import micropython from "./generated/micropython.wasm";
import { runTask } from "./engine";
import type { SandboxTask } from "./sandbox.types";

export default {
  async fetch(request: Request): Promise<Response> {
    const task = (await request.json()) as SandboxTask;
    const outcome = await runTask(task, { quickjs, micropython });
    return Response.json(outcome);
  },
};
