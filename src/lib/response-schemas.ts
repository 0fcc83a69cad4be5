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

/** Group A's untyped record envelopes; every /v1 fetch and list now uses fetchedObjectOf / objectListOf below (kept for branches still importing them). */
const GroupARecord = z
  .record(z.string(), z.unknown())
  .openapi("GroupARecord", { description: "A record as JSON; its fields depend on the resource." });
export const CreatedId = z.object({ status: z.literal("success"), id: z.string() }).openapi("CreatedId");
export const FetchedObject = z.object({ status: z.literal("success"), object: GroupARecord }).openapi("FetchedObject");
export const ObjectList = z
  .object({
    status: z.literal("success"),
    object_ids: z.array(z.string()),
    objects: z.array(GroupARecord).openapi({ description: "Empty unless verbose=true" }),
  })
  .openapi("ObjectList");

/*
 * The typed envelopes: a generated client (openapi-typescript) reads `object` / `objects` with the
 * record's own fields typed, instead of `Record<string, unknown>`. `name` prefixes the component.
 */
export function fetchedObjectOf<S extends z.ZodType>(name: string, record: S) {
  return z.object({ status: z.literal("success"), object: record }).openapi(`${name}Fetched`);
}

export function objectListOf<S extends z.ZodType>(name: string, record: S) {
  return z
    .object({
      status: z.literal("success"),
      object_ids: z.array(z.string()),
      objects: z.array(record).openapi({ description: "Empty unless verbose=true" }),
    })
    .openapi(`${name}List`);
}
