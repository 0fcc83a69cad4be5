import type { z } from "@hono/zod-openapi";
import { tryParseJson } from "./body";

/**
 * The fields of a body that its schema does not declare and that validation therefore dropped
 * (`chunksize`, `config.scor_cutoff`, `hybrid_search_config` one level too high). Only objects
 * that strip unknown keys are searched: strict objects already refuse them, and free-form objects
 * (records, passthrough) keep them as data. Names are dotted paths; at most MAX_WARNINGS.
 */
export const MAX_WARNINGS = 20;

export interface Def {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  element?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  getter?: () => z.ZodType;
  options?: readonly z.ZodType[];
  valueType?: z.ZodType;
  left?: z.ZodType;
  right?: z.ZodType;
}

export const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** The schema that actually reads the value: through optional, default, preprocess and the like. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (let i = 0; i < 20; i++) {
    const def = defOf(current);
    if (
      def.innerType &&
      ["optional", "nullable", "default", "prefault", "catch", "readonly", "nonoptional"].includes(def.type)
    )
      current = def.innerType;
    else if (def.type === "pipe" && def.in && def.out) current = defOf(def.in).type === "transform" ? def.out : def.in;
    else if (def.type === "lazy" && def.getter) current = def.getter();
    else return current;
  }
  return current;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function unknownFields(schema: z.ZodType, value: unknown): string[] {
  const found: string[] = [];
  // An explicit stack, not recursion: bodies nest up to 64 levels.
  const stack: [z.ZodType, unknown, string][] = [[schema, value, ""]];
  while (stack.length > 0 && found.length < MAX_WARNINGS) {
    const [node, raw, prefix] = stack.pop() as [z.ZodType, unknown, string];
    const inner = unwrap(node);
    const def = defOf(inner);
    const data = typeof raw === "string" && raw.trim().startsWith("{") ? tryParseJson(raw) : raw;
    if (def.type === "object" && def.shape && isPlainObject(data)) {
      // A catchall (passthrough, or never for strict) means unknown keys are kept or already refused.
      const strips = def.catchall === undefined;
      for (const [key, member] of Object.entries(data)) {
        const declared = Object.hasOwn(def.shape, key) ? def.shape[key] : undefined;
        if (declared) stack.push([declared, member, `${prefix}${key}.`]);
        else if (strips && member !== null) found.push(`${prefix}${key}`);
      }
    } else if (def.type === "array" && def.element && Array.isArray(data)) {
      data.slice(0, 100).forEach((item, index) => stack.push([def.element as z.ZodType, item, `${prefix}${index}.`]));
    }
  }
  return found.sort();
}
