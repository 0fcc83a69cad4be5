import { z } from "@hono/zod-openapi";
import { tryParseJson, withoutNullMembers } from "./body";
import { ID_PATTERN } from "./ids";
import { MAX_JSON_DEPTH } from "./json-depth";

/**
 * Field types that accept both JSON values and their form-encoded spellings, so a body sent as
 * JSON, multipart or urlencoded validates the same way. Every helper takes explicit bounds.
 */

function fromFormText(value: unknown, convert: (text: string) => unknown): unknown {
  return typeof value === "string" ? convert(value.trim()) : value;
}

export const zBool = () =>
  z.preprocess(
    (v) =>
      fromFormText(v, (t) => {
        const lower = t.toLowerCase();
        if (lower === "true" || lower === "1" || lower === "on" || lower === "yes") return true;
        if (lower === "false" || lower === "0" || lower === "off" || lower === "no" || lower === "") return false;
        return t;
      }),
    z.boolean(),
  );

export const zInt = (min: number, max: number) =>
  z.preprocess(
    (v) => fromFormText(v, (t) => (t === "" ? undefined : /^-?\d+$/.test(t) ? Number(t) : t)),
    z.number().int().min(min).max(max),
  );

export const zNumber = (min: number, max: number) =>
  z.preprocess(
    (v) => fromFormText(v, (t) => (t === "" ? undefined : Number.isFinite(Number(t)) ? Number(t) : t)),
    z.number().min(min).max(max),
  );

export const zString = (min: number, max: number) => z.string().min(min).max(max);

export const zId = () => z.string().regex(ID_PATTERN, "must be a 24-character hex id");

function fromJsonText(value: unknown): unknown {
  return typeof value === "string" && value.trim().startsWith("{") ? (tryParseJson(value) ?? value) : value;
}

/** An object of declared fields that may arrive as a JSON string in one form field; a field sent as null is not set. */
export const zJsonObject = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => withoutNullMembers(fromJsonText(v)), schema);

/**
 * Nesting a free-form object may have (the same bound as a whole body, for values that arrive
 * as JSON text in a form field): deeper values overflow the stack of structured clone (RPC)
 * and recursive readers.
 */
export const MAX_FREE_OBJECT_DEPTH = MAX_JSON_DEPTH;

/** Deepest nesting of arrays and objects in a value, counted without recursion; stops once past `limit`. */
export function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0 && deepest <= limit) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (node === null || typeof node !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Array.isArray(node) ? node : Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** A free-form object of bounded nesting and serialized size (it may arrive as a JSON string; its nulls are values). */
export const zFreeObject = (maxBytes = 64 * 1024) =>
  z.preprocess(
    fromJsonText,
    z
      .record(z.string(), z.unknown())
      .refine((o) => nestingDepth(o, MAX_FREE_OBJECT_DEPTH) <= MAX_FREE_OBJECT_DEPTH, {
        message: `must nest at most ${MAX_FREE_OBJECT_DEPTH} levels`,
        abort: true,
      })
      .refine((o) => JSON.stringify(o).length <= maxBytes, `must serialize to at most ${maxBytes} bytes`),
  );

/**
 * An array that may arrive as repeated form fields, a JSON array string, a comma-separated
 * string, or a single value.
 */
export const zArray = <T extends z.ZodType>(item: T, max: number) =>
  z.preprocess((v) => {
    if (typeof v !== "string") return v;
    const text = v.trim();
    if (text.startsWith("[")) return tryParseJson(text) ?? v;
    return [v];
  }, z.array(item).max(max));
