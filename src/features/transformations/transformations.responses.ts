import { z } from "@hono/zod-openapi";
import { fetchedObjectOf, objectListOf, ownedRecordShape } from "../../lib/response-schemas";

/** toRecord's fields (transformations.service.ts); `inputs` / `outputs` are the author's JSON Schemas, free-form. */
export const Transformation = z
  .object({
    ...ownedRecordShape,
    function_name: z.string(),
    function: z.string(),
    inputs: z.record(z.string(), z.unknown()),
    outputs: z.record(z.string(), z.unknown()),
    language: z.enum(["python", "javascript"]),
  })
  .openapi("Transformation");
export const TransformationFetched = fetchedObjectOf("Transformation", Transformation);
export const TransformationList = objectListOf("Transformation", Transformation);

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
