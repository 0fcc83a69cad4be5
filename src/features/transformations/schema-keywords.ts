/**
 * Where subschemas live in a JSON Schema, as @cfworker/json-schema reads them. The creation
 * check, the rewrite before validation and the work estimate all walk schemas through
 * `subschemaSlots`, so a keyword that holds a schema cannot be seen by one walker and missed by
 * another (a `pattern` missed by the rewrite would reach the validator's backtracking RegExp).
 */

export type SchemaObject = Record<string, unknown>;

export function isPlainObject(value: unknown): value is SchemaObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * How a slot's schema applies: to the same value (`in-place`), to some of an object's property
 * values (`property`: under `key` of `properties`, or `pattern` / `additional` / `unevaluated`),
 * to its property names (`name`), to array items (`item`: at index `key`, or `rest` for every
 * item past the prefix, `contains` for any), or not at all until referenced (`definition`).
 */
export type SlotKind =
  | "in-place"
  | "property"
  | "pattern"
  | "additional"
  | "unevaluated"
  | "name"
  | "item"
  | "rest"
  | "contains"
  | "definition";

export interface Slot {
  keyword: string;
  /** The map key or list index inside the keyword, if any. */
  key?: string | number;
  kind: SlotKind;
  schema: unknown;
}

const SINGLE: Record<string, SlotKind> = {
  not: "in-place",
  if: "in-place",
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's `then` keyword; this table is never awaited.
  then: "in-place",
  else: "in-place",
  additionalProperties: "additional",
  unevaluatedProperties: "unevaluated",
  propertyNames: "name",
  additionalItems: "rest",
  unevaluatedItems: "rest",
  contains: "contains",
};
const LISTS: Record<string, SlotKind> = {
  allOf: "in-place",
  anyOf: "in-place",
  oneOf: "in-place",
  prefixItems: "item",
};
const MAPS: Record<string, SlotKind> = {
  properties: "property",
  patternProperties: "pattern",
  dependentSchemas: "in-place",
  $defs: "definition",
  definitions: "definition",
};

/** Keywords that must hold a map of subschemas or a list of them (the shape check uses these). */
export const MAP_KEYWORDS = Object.keys(MAPS);
export const LIST_KEYWORDS = Object.keys(LISTS);

/** Every subschema directly inside `node`, in a stable order. Values of the wrong shape are skipped (the check reports them). */
export function subschemaSlots(node: SchemaObject): Slot[] {
  const slots: Slot[] = [];
  for (const [keyword, kind] of Object.entries(SINGLE))
    if (keyword in node) slots.push({ keyword, kind, schema: node[keyword] });
  if ("items" in node) {
    const items = node.items;
    // `items` as a list is the tuple form of drafts before 2020-12; the validator still reads it.
    if (Array.isArray(items))
      items.forEach((schema, key) => slots.push({ keyword: "items", key, kind: "item", schema }));
    else slots.push({ keyword: "items", kind: "rest", schema: items });
  }
  for (const [keyword, kind] of Object.entries(LISTS)) {
    const list = node[keyword];
    if (Array.isArray(list)) list.forEach((schema, key) => slots.push({ keyword, key, kind, schema }));
  }
  for (const [keyword, kind] of Object.entries(MAPS)) {
    const map = node[keyword];
    if (isPlainObject(map)) for (const [key, schema] of Object.entries(map)) slots.push({ keyword, key, kind, schema });
  }
  // Draft 7 `dependencies`: a list of names (no schema) or a schema applied to the whole object.
  if (isPlainObject(node.dependencies)) {
    for (const [key, schema] of Object.entries(node.dependencies))
      if (!Array.isArray(schema)) slots.push({ keyword: "dependencies", key, kind: "in-place", schema });
  }
  return slots;
}

/** The JSON path of a slot below `path`, as error messages name it. */
export function slotPath(path: string, slot: Slot): string {
  return slot.key === undefined ? `${path}.${slot.keyword}` : `${path}.${slot.keyword}.${slot.key}`;
}
