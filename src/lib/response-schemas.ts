import { z } from "@hono/zod-openapi";

/** The bare acknowledgement of a Group B change. */
export const Success = z.object({ status: z.literal("success") }).openapi("Success");

/** The fields every owned record carries (see ownedRecordFields). */
export const ownedRecordShape = {
  _id: z.string(),
  name: z.string(),
  description: z.string(),
  ownerId: z.string(),
  orgId: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
};

/** `{status: "success", <key>: schema}`: how Group B wraps one record or one list. */
export function successWith<K extends string, S extends z.ZodType>(key: K, schema: S) {
  return z.object({ status: z.literal("success") }).extend({ [key]: schema } as { [P in K]: S });
}
