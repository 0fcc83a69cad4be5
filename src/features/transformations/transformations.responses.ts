import { z } from "@hono/zod-openapi";

export const TransformationRunResult = z
  .object({
    status: z.literal("success"),
    result: z.record(z.string(), z.unknown()),
    logs: z
      .array(z.string())
      .optional()
      .openapi({ description: "What the function printed, one string per line, when there is any" }),
  })
  .openapi("TransformationRunResult");
