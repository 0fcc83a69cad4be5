import { z } from "@hono/zod-openapi";
import { zArray, zBool, zFreeObject, zId, zString } from "../../lib/schema";

export const AgentParams = z.object({ id: zId() });
export const AgentRunParams = z.object({ id: zId(), run_id: zId() });

export const AgentRunBody = z
  .object({
    inputs: zFreeObject(1024 * 1024)
      .optional()
      .default({})
      .openapi({ description: "Values of the agent's inputs, by input name." }),
    additional_instructions: zString(0, 20_000).optional(),
    stream: zBool().optional().default(false),
  })
  // The SDK sends a file input as a top-level multipart part named after the input.
  .catchall(z.unknown())
  .openapi("AgentRunBody", {
    description:
      "JSON, or multipart with `inputs` as JSON text and one file part per file input, named after the input.",
  });

export const AgentResumeBody = z
  .object({
    run_id: zId(),
    approve: zArray(zString(1, 200), 64)
      .optional()
      .default([])
      .openapi({ description: "Ids of pending calls to run." }),
    refuse: zArray(zString(1, 200), 64)
      .optional()
      .default([])
      .openapi({ description: "Ids of pending calls not to run; the model is told the user refused." }),
    answers: z
      .record(zString(1, 200), zString(0, 20_000))
      .optional()
      .default({})
      .openapi({ description: "Answers to pending ask_user calls, by call id." }),
  })
  .openapi("AgentResumeBody");

export const AgentRunIdBody = z.object({ run_id: zId() }).openapi("AgentRunIdBody");
