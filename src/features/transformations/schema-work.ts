import { isPlainObject, subschemaSlots, type SchemaObject } from "./schema-keywords";
import { ValidationTooCostly } from "./schema-patterns";
import { resolveCheckedRef } from "./schema-refs";

/**
 * An upper bound on what the validator will do with a (rewritten) schema and a value, taken
 * before it runs: it follows the same subschemas to the same parts of the value, without
 * evaluating any keyword, and stops as soon as the bound passes the budget. Schemas can make
 * work grow with the value exponentially (two `allOf` branches that both lead back to the
 * root through a property double the work per level), quadratically (`uniqueItems`) or
 * recursion past the stack; the validator cannot be interrupted, so it only runs when the
 * bound fits.
 */

/** Work units one validation may take; a unit is about one subschema applied to one value (roughly a microsecond). */
export const MAX_VALIDATION_WORK = 500_000;
/** Subschema applications nested inside each other; the validator's recursion overflows the stack a few hundred down. */
export const MAX_VALIDATION_NESTING = 200;

/** What applying one subschema involves, worked out once per subschema and validation. */
interface Plan {
  /** Work beyond the visit itself: keyword loops over the schema's own lists. */
  cost: number;
  uniqueItems: boolean;
  inPlace: unknown[];
  properties: [string, unknown][];
  /** Applied to every property value (`additionalProperties` and the like), or to every name. */
  everyValue: unknown[];
  everyName: unknown[];
  items: [number, unknown][];
  everyItem: unknown[];
}

function planOf(node: SchemaObject, root: SchemaObject | boolean): Plan {
  let cost = 1;
  if (isPlainObject(node.properties)) cost += Object.keys(node.properties).length / 8;
  if (Array.isArray(node.required)) cost += node.required.length / 8;
  // enum and const compare deeply and a failure prints the whole enum: charge their size.
  if ("enum" in node) cost += JSON.stringify(node.enum).length / 64;
  if ("const" in node) cost += JSON.stringify(node.const).length / 64;
  const plan: Plan = {
    cost,
    uniqueItems: node.uniqueItems === true,
    inPlace: [],
    properties: [],
    everyValue: [],
    everyName: [],
    items: [],
    everyItem: [],
  };
  if (typeof node.$ref === "string") plan.inPlace.push(resolveCheckedRef(root, node.$ref));
  for (const slot of subschemaSlots(node)) {
    if (slot.kind === "in-place") plan.inPlace.push(slot.schema);
    else if (slot.kind === "property") plan.properties.push([String(slot.key), slot.schema]);
    else if (slot.kind === "pattern" || slot.kind === "additional" || slot.kind === "unevaluated")
      plan.everyValue.push(slot.schema);
    else if (slot.kind === "name") plan.everyName.push(slot.schema);
    else if (slot.kind === "item" && typeof slot.key === "number") plan.items.push([slot.key, slot.schema]);
    else if (slot.kind === "rest" || slot.kind === "contains") plan.everyItem.push(slot.schema);
  }
  return plan;
}

/**
 * `uniqueItems` compares every pair of items (a few nanoseconds for scalars); objects and
 * arrays compare deeply, so pairs of them cost more the larger they are.
 */
function uniqueItemsCost(array: unknown[]): number {
  const pairs = array.length * array.length;
  const deep = array.some((item) => typeof item === "object" && item !== null);
  return deep ? (pairs * (1 + JSON.stringify(array).length / Math.max(array.length, 1) / 16)) / 64 : pairs / 64;
}

/** Throws ValidationTooCostly when validating `value` against `root` could pass the budget. */
export function boundValidationWork(root: SchemaObject | boolean, value: unknown, budget = MAX_VALIDATION_WORK): void {
  let spent = 0;
  const spend = (units: number) => {
    spent += units;
    if (spent > budget) throw new ValidationTooCostly();
  };
  const plans = new Map<SchemaObject, Plan>();
  const stack: [unknown, unknown, number][] = [[root, value, 1]];
  const apply = (schema: unknown, target: unknown, nesting: number) => {
    if (nesting > MAX_VALIDATION_NESTING) throw new ValidationTooCostly();
    spend(1);
    stack.push([schema, target, nesting]);
  };
  spend(1);
  while (stack.length > 0) {
    const [schema, target, nesting] = stack.pop() as [unknown, unknown, number];
    if (!isPlainObject(schema)) continue;
    let plan = plans.get(schema);
    if (!plan) {
      plan = planOf(schema, root);
      plans.set(schema, plan);
    }
    spend(plan.cost);
    const next = nesting + 1;
    if (typeof target === "string") spend(target.length / 256);
    for (const sub of plan.inPlace) apply(sub, target, next);
    if (isPlainObject(target)) {
      for (const [name, sub] of plan.properties) if (Object.hasOwn(target, name)) apply(sub, target[name], next);
      if (plan.everyValue.length > 0 || plan.everyName.length > 0) {
        for (const name of Object.keys(target)) {
          for (const sub of plan.everyValue) apply(sub, target[name], next);
          for (const sub of plan.everyName) apply(sub, name, next);
        }
      }
    } else if (Array.isArray(target)) {
      if (plan.uniqueItems) spend(uniqueItemsCost(target));
      for (const [index, sub] of plan.items) if (index < target.length) apply(sub, target[index], next);
      for (const sub of plan.everyItem) for (const item of target) apply(sub, item, next);
    }
  }
}
