import { isPlainObject, type SchemaObject } from "./schema-keywords";

/**
 * The `$ref` forms Loom accepts: the whole schema, or a named entry of its `$defs` /
 * `definitions`. Narrowing references to these lets every walker resolve them the way the
 * validator does (no base-URI changes, no percent-encoding), and lets creation refuse a
 * reference that would fail, or loop, at run time.
 */
const LOCAL_REF = /^#(?:\/(\$defs|definitions)\/([A-Za-z0-9_.-]{1,100}))?$/;

export const REF_FORMS = '"#", "#/$defs/<name>" or "#/definitions/<name>" (names of letters, digits, "_", "-" and ".")';

/** The schema `ref` names inside `root`, "unsupported" for another form, or "missing". */
export function resolveRef(root: unknown, ref: string): unknown | "unsupported" | "missing" {
  const match = LOCAL_REF.exec(ref);
  if (!match) return "unsupported";
  if (!match[1]) return root;
  const container = isPlainObject(root) ? root[match[1]] : undefined;
  if (!isPlainObject(container) || !Object.hasOwn(container, match[2])) return "missing";
  const target = container[match[2]];
  return typeof target === "boolean" || isPlainObject(target) ? target : "missing";
}

/** Resolves a reference already accepted at creation; a stored schema cannot break it, but fail loudly if one does. */
export function resolveCheckedRef(root: unknown, ref: string): SchemaObject | boolean {
  const target = resolveRef(root, ref);
  if (typeof target === "boolean" || isPlainObject(target)) return target;
  throw new Error(`unresolvable $ref ${JSON.stringify(ref)} in a checked schema`);
}
