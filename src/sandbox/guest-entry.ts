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

/** The fetch handler of a guest for one language. */
export function serveTasks(language: SandboxLanguage, run: (task: SandboxTask) => Promise<SandboxOutcome>): ExportedHandler {
  return {
    async fetch(request: Request): Promise<Response> {
      const task = (await request.json()) as SandboxTask;
      const outcome = task.language === language ? await guarded(() => run(task)) : failure("crashed", "transformation stopped the sandbox's interpreter");
      return Response.json(outcome);
    },
  };
}
