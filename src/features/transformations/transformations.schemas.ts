import { z } from "@hono/zod-openapi";
import { zFreeObject, zId, zString } from "../../lib/schema";

/** A name both QuickJS and MicroPython accept as a top-level function name; empty: the only function. */
const FunctionName = zString(0, 100)
  .regex(
    /^(?:[A-Za-z_][A-Za-z0-9_]*)?$/,
    "must be an identifier (letters, digits and underscores, not starting with a digit)",
  )
  .openapi({
    description:
      "The function to run. Empty (the hosted SDK's default): the only top-level function the source defines.",
  });

const IoSchemaField = (what: string) =>
  zFreeObject(64 * 1024)
    .optional()
    .openapi({ description: `${what}: a JSON Schema for an object, or the simple form {field: type}.` });

export const TransformationCreateBody = z
  .object({
    name: zString(1, 200),
    description: zString(0, 2000).optional().default(""),
    function_name: FunctionName,
    function: zString(1, 100_000).openapi({ description: "The function's source text." }),
    language: z.enum(["python", "javascript"]).optional().default("python").openapi({
      description: "python (keyword arguments, returns a dict) or javascript (one object, returns an object).",
    }),
    input_schema: IoSchemaField("Input schema"),
    output_schema: IoSchemaField("Output schema"),
    inputs: IoSchemaField("Alias of input_schema"),
    outputs: IoSchemaField("Alias of output_schema"),
  })
  .openapi("TransformationCreateBody");

export const TransformationParams = z.object({ id: zId() });

export const TransformationRunBody = z
  .object({
    inputs: zFreeObject(512 * 1024)
      .optional()
      .default({})
      .openapi({ description: "The inputs, validated against the input schema." }),
  })
  .openapi("TransformationRunBody");

export type TransformationCreateInput = z.output<typeof TransformationCreateBody>;
