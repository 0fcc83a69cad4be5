/**
 * Deepest nesting of objects and arrays Loom accepts in a JSON value from outside (a request
 * body, a JSON-text field, a transformation's result). Everything that walks a value
 * recursively (JSON.stringify when answering, zod, the JSON-schema validator) overflows the
 * stack a few thousand levels down, which used to surface as a 500 after the value was stored.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * True when `value` nests objects or arrays more than `limit` levels deep (`{}` and `[]` are
 * one level, a scalar none). Iterative, so measuring a hostile value cannot itself overflow.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (typeof node !== "object" || node === null) continue;
    if (depth + 1 > limit) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}
