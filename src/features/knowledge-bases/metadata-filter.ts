/**
 * The two filter languages of CONTRACT.md (Qdrant-style `filter`, OpenSearch-style
 * `searchengine_filter`) compile to ONE filter tree. The tree has two readings that agree:
 * SQL over the chunk table's JSON metadata (keyword search, candidate sets) and a predicate over a
 * metadata object (vector candidates, and a final check on every result). A filter that does not
 * parse is an error that says where; a filter is never dropped.
 */

export type Scalar = string | number | boolean;

export type FilterNode =
  | { op: "and"; children: FilterNode[] }
  | { op: "or"; children: FilterNode[] }
  | { op: "not"; child: FilterNode }
  | { op: "eq"; key: string; value: Scalar }
  | { op: "in"; key: string; values: Scalar[] }
  | {
      op: "range";
      key: string;
      gt?: number | string;
      gte?: number | string;
      lt?: number | string;
      lte?: number | string;
    }
  | { op: "text"; key: string; text: string }
  | { op: "prefix"; key: string; prefix: string }
  | { op: "exists"; key: string }
  | { op: "empty"; key: string };

export class FilterParseError extends Error {
  constructor(
    readonly where: string,
    message: string,
  ) {
    super(`at ${where || "the top level"}: ${message}`);
  }
}

const MAX_DEPTH = 12;
const MAX_NODES = 64;
const KEY = /^[A-Za-z0-9_\-.:@$ ]{1,128}$/;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const isScalar = (v: unknown): v is Scalar =>
  typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));

class Budget {
  nodes = 0;
  tick(where: string, depth: number): void {
    if (depth > MAX_DEPTH) throw new FilterParseError(where, `nesting deeper than ${MAX_DEPTH} levels`);
    if (++this.nodes > MAX_NODES) throw new FilterParseError(where, `more than ${MAX_NODES} conditions`);
  }
}

function checkKey(key: unknown, where: string): string {
  if (typeof key !== "string" || !KEY.test(key))
    throw new FilterParseError(where, "key must be a field name of 1-128 letters, digits or _-.:@$");
  return key;
}

function rangeBounds(value: unknown, where: string): Omit<Extract<FilterNode, { op: "range" }>, "op" | "key"> {
  if (!isObject(value)) throw new FilterParseError(where, "range must be an object with gt, gte, lt or lte");
  const out: Record<string, number | string> = {};
  for (const [name, bound] of Object.entries(value)) {
    if (!["gt", "gte", "lt", "lte"].includes(name))
      throw new FilterParseError(`${where}.${name}`, "unknown range bound (use gt, gte, lt, lte)");
    if (!(typeof bound === "number" && Number.isFinite(bound)) && typeof bound !== "string")
      throw new FilterParseError(`${where}.${name}`, "a range bound must be a number or a string");
    out[name] = bound;
  }
  if (Object.keys(out).length === 0) throw new FilterParseError(where, "range needs at least one of gt, gte, lt, lte");
  return out;
}

function scalarList(value: unknown, where: string): Scalar[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 1000 || !value.every(isScalar))
    throw new FilterParseError(where, "must be a non-empty array of strings, numbers or booleans");
  return value;
}

// ---------- Qdrant-style ----------

function qdrantFilter(value: unknown, where: string, depth: number, budget: Budget): FilterNode {
  if (!isObject(value)) throw new FilterParseError(where, "a filter must be an object");
  budget.tick(where, depth);
  const parts: FilterNode[] = [];
  for (const [clause, list] of Object.entries(value)) {
    const at = where ? `${where}.${clause}` : clause;
    if (!["must", "should", "must_not", "min_should"].includes(clause))
      throw new FilterParseError(at, "unknown clause (use must, should, must_not)");
    if (clause === "min_should") throw new FilterParseError(at, "min_should is not supported");
    const items = Array.isArray(list) ? list : [list];
    const conditions = items.map((item, i) => qdrantCondition(item, `${at}[${i}]`, depth + 1, budget));
    if (clause === "must") parts.push(...conditions);
    else if (clause === "should")
      parts.push(conditions.length === 1 ? conditions[0] : { op: "or", children: conditions });
    else parts.push(...conditions.map((child): FilterNode => ({ op: "not", child })));
  }
  if (parts.length === 0) throw new FilterParseError(where, "an empty filter: give must, should or must_not");
  return parts.length === 1 ? parts[0] : { op: "and", children: parts };
}

function qdrantCondition(value: unknown, where: string, depth: number, budget: Budget): FilterNode {
  if (!isObject(value)) throw new FilterParseError(where, "a condition must be an object");
  budget.tick(where, depth);
  if ("must" in value || "should" in value || "must_not" in value) return qdrantFilter(value, where, depth, budget);
  if ("is_empty" in value) {
    const inner = value.is_empty;
    return { op: "empty", key: checkKey(isObject(inner) ? inner.key : undefined, `${where}.is_empty.key`) };
  }
  if ("is_null" in value) {
    const inner = value.is_null;
    return {
      op: "not",
      child: { op: "exists", key: checkKey(isObject(inner) ? inner.key : undefined, `${where}.is_null.key`) },
    };
  }
  if ("has_id" in value) {
    return { op: "in", key: "document_id", values: scalarList(value.has_id, `${where}.has_id`) };
  }
  const key = checkKey(value.key, `${where}.key`);
  if ("match" in value) {
    const match = value.match;
    const at = `${where}.match`;
    if (!isObject(match)) throw new FilterParseError(at, "match must be an object with value, any, except or text");
    if ("value" in match) {
      if (!isScalar(match.value)) throw new FilterParseError(`${at}.value`, "must be a string, number or boolean");
      return { op: "eq", key, value: match.value };
    }
    if ("any" in match) return { op: "in", key, values: scalarList(match.any, `${at}.any`) };
    if ("except" in match)
      return { op: "not", child: { op: "in", key, values: scalarList(match.except, `${at}.except`) } };
    if ("text" in match) {
      if (typeof match.text !== "string" || match.text.length === 0)
        throw new FilterParseError(`${at}.text`, "must be a non-empty string");
      return { op: "text", key, text: match.text };
    }
    throw new FilterParseError(at, "match needs value, any, except or text");
  }
  if ("range" in value) return { op: "range", key, ...rangeBounds(value.range, `${where}.range`) };
  throw new FilterParseError(where, "a condition needs match, range, is_empty or a nested filter");
}

// ---------- OpenSearch-style ----------

function fieldAndValue(value: unknown, where: string): [string, unknown] {
  if (!isObject(value)) throw new FilterParseError(where, "must be an object naming one field");
  const entries = Object.entries(value).filter(([k]) => k !== "boost" && k !== "_name");
  if (entries.length !== 1) throw new FilterParseError(where, "must name exactly one field");
  return [checkKey(entries[0][0], where), entries[0][1]];
}

function openSearchQuery(value: unknown, where: string, depth: number, budget: Budget): FilterNode {
  if (!isObject(value)) throw new FilterParseError(where, "a query clause must be an object");
  budget.tick(where, depth);
  const kinds = Object.keys(value);
  if (kinds.length !== 1)
    throw new FilterParseError(
      where,
      "a query clause must have exactly one kind (bool, term, terms, match, range, exists, prefix)",
    );
  const kind = kinds[0];
  const body = value[kind];
  const at = where ? `${where}.${kind}` : kind;
  switch (kind) {
    case "query":
      return openSearchQuery(body, at, depth + 1, budget);
    case "bool": {
      if (!isObject(body)) throw new FilterParseError(at, "bool must be an object");
      const parts: FilterNode[] = [];
      for (const [clause, list] of Object.entries(body)) {
        const clauseAt = `${at}.${clause}`;
        if (clause === "minimum_should_match" || clause === "boost") continue;
        if (!["must", "should", "filter", "must_not"].includes(clause))
          throw new FilterParseError(clauseAt, "unknown bool clause (use must, should, filter, must_not)");
        const items = Array.isArray(list) ? list : [list];
        const conditions = items.map((item, i) => openSearchQuery(item, `${clauseAt}[${i}]`, depth + 1, budget));
        if (clause === "should") {
          if (conditions.length)
            parts.push(conditions.length === 1 ? conditions[0] : { op: "or", children: conditions });
        } else if (clause === "must_not") parts.push(...conditions.map((child): FilterNode => ({ op: "not", child })));
        else parts.push(...conditions);
      }
      if (parts.length === 0) throw new FilterParseError(at, "an empty bool: give must, should, filter or must_not");
      return parts.length === 1 ? parts[0] : { op: "and", children: parts };
    }
    case "term": {
      const [key, raw] = fieldAndValue(body, at);
      const term = isObject(raw) ? raw.value : raw;
      if (!isScalar(term)) throw new FilterParseError(`${at}.${key}`, "a term must be a string, number or boolean");
      return { op: "eq", key, value: term };
    }
    case "terms": {
      const [key, raw] = fieldAndValue(body, at);
      return { op: "in", key, values: scalarList(raw, `${at}.${key}`) };
    }
    case "match":
    case "match_phrase": {
      const [key, raw] = fieldAndValue(body, at);
      const text = isObject(raw) ? raw.query : raw;
      if (typeof text === "number" || typeof text === "boolean") return { op: "eq", key, value: text };
      if (typeof text !== "string" || text.length === 0)
        throw new FilterParseError(`${at}.${key}`, "match needs a non-empty string");
      return { op: "text", key, text };
    }
    case "range": {
      const [key, raw] = fieldAndValue(body, at);
      const bounds = isObject(raw)
        ? Object.fromEntries(Object.entries(raw).filter(([k]) => k !== "format" && k !== "boost"))
        : raw;
      return { op: "range", key, ...rangeBounds(bounds, `${at}.${key}`) };
    }
    case "exists": {
      if (!isObject(body)) throw new FilterParseError(at, "exists must be {field: name}");
      return { op: "exists", key: checkKey(body.field, `${at}.field`) };
    }
    case "prefix": {
      const [key, raw] = fieldAndValue(body, at);
      const prefix = isObject(raw) ? raw.value : raw;
      if (typeof prefix !== "string" || prefix.length === 0)
        throw new FilterParseError(`${at}.${key}`, "a prefix must be a non-empty string");
      return { op: "prefix", key, prefix };
    }
    case "match_all":
      throw new FilterParseError(at, "match_all filters nothing; leave the filter out instead");
    default:
      throw new FilterParseError(at, "unsupported query kind (use bool, term, terms, match, range, exists, prefix)");
  }
}

function parseJsonText(text: string, language: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const detail = error instanceof Error ? error.message : "invalid JSON";
    throw new FilterParseError("", `${language} is not valid JSON (${detail})`);
  }
}

export function parseQdrantFilter(source: string | Json): FilterNode {
  const value = typeof source === "string" ? parseJsonText(source, "filter") : source;
  return qdrantFilter(value, "", 0, new Budget());
}

export function parseOpenSearchFilter(source: string | Json): FilterNode {
  const value = typeof source === "string" ? parseJsonText(source, "searchengine_filter") : source;
  return openSearchQuery(value, "", 0, new Budget());
}

/** Both filters must hold when both are given. */
export function combineFilters(...filters: (FilterNode | undefined)[]): FilterNode | undefined {
  const present = filters.filter((f): f is FilterNode => f !== undefined);
  if (present.length === 0) return undefined;
  return present.length === 1 ? present[0] : { op: "and", children: present };
}

// ---------- the predicate reading ----------

function valuesAt(metadata: Json, key: string): unknown[] {
  const value = metadata[key];
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

function sameTypeCompare(a: unknown, b: number | string): number | undefined {
  if (typeof b === "number" && typeof a === "number") return a - b;
  if (typeof b === "string" && typeof a === "string") return a < b ? -1 : a > b ? 1 : 0;
  return undefined;
}

/** Booleans compare as SQLite stores them in JSON (1 and 0), so both readings agree. */
const norm = (v: unknown): unknown => (typeof v === "boolean" ? (v ? 1 : 0) : v);

export function matchesFilter(node: FilterNode, metadata: Json): boolean {
  switch (node.op) {
    case "and":
      return node.children.every((c) => matchesFilter(c, metadata));
    case "or":
      return node.children.some((c) => matchesFilter(c, metadata));
    case "not":
      return !matchesFilter(node.child, metadata);
    case "eq":
      return valuesAt(metadata, node.key).some((v) => norm(v) === norm(node.value));
    case "in":
      return valuesAt(metadata, node.key).some((v) => node.values.some((x) => norm(x) === norm(v)));
    case "range":
      return valuesAt(metadata, node.key).some((v) => {
        const checks: [number | string | undefined, (c: number) => boolean][] = [
          [node.gt, (c) => c > 0],
          [node.gte, (c) => c >= 0],
          [node.lt, (c) => c < 0],
          [node.lte, (c) => c <= 0],
        ];
        return checks.every(([bound, ok]) => {
          if (bound === undefined) return true;
          const c = sameTypeCompare(v, bound);
          return c !== undefined && ok(c);
        });
      });
    case "text":
      return valuesAt(metadata, node.key).some(
        (v) => typeof v === "string" && v.toLowerCase().includes(node.text.toLowerCase()),
      );
    case "prefix":
      return valuesAt(metadata, node.key).some((v) => typeof v === "string" && v.startsWith(node.prefix));
    case "exists":
      return valuesAt(metadata, node.key).length > 0;
    case "empty":
      return valuesAt(metadata, node.key).length === 0;
  }
}

// ---------- the SQL reading ----------

export interface SqlFilter {
  sql: string;
  params: (string | number)[];
}

/** Durable Object SQLite binds at most 100 parameters per statement; a filter keeps under this. */
export const MAX_FILTER_SQL_PARAMS = 90;

/**
 * `'$."key"'` as a SQL literal: keys are checked against KEY (no quotes), so inlining is safe and
 * saves a bound parameter per condition.
 */
const jsonPathLiteral = (key: string): string => `'$."${key}"'`;

/** Metadata values under a key, scalar or array, as rows of json_each (none when missing or null). */
function eachValue(column: string, key: string, condition: string, params: (string | number)[]): SqlFilter {
  if (!KEY.test(key)) throw new FilterParseError(key, "invalid key");
  return {
    sql: `EXISTS (SELECT 1 FROM json_each(${column}, ${jsonPathLiteral(key)}) AS v WHERE v.type != 'null' AND (${condition}))`,
    params,
  };
}

const sqlValue = (v: Scalar): string | number => (typeof v === "boolean" ? (v ? 1 : 0) : v);
const typeGuard = (v: number | string): string =>
  typeof v === "number" ? "v.type IN ('integer','real')" : "v.type = 'text'";

/** Compiles the tree to a WHERE clause over a JSON `column`, with bound parameters only. */
export function filterToSql(node: FilterNode, column = "metadata"): SqlFilter {
  const join = (children: FilterNode[], glue: string): SqlFilter => {
    const parts = children.map((c) => filterToSql(c, column));
    return { sql: `(${parts.map((p) => p.sql).join(glue)})`, params: parts.flatMap((p) => p.params) };
  };
  switch (node.op) {
    case "and":
      return join(node.children, " AND ");
    case "or":
      return join(node.children, " OR ");
    case "not": {
      const inner = filterToSql(node.child, column);
      return { sql: `NOT ${inner.sql}`, params: inner.params };
    }
    case "eq": {
      const value = sqlValue(node.value);
      return eachValue(
        column,
        node.key,
        `v.value = ? AND ${typeof value === "number" ? "v.type IN ('integer','real','true','false')" : "v.type = 'text'"}`,
        [value],
      );
    }
    case "in": {
      // One JSON-array parameter, however long the list; booleans become 1/0 as in the predicate.
      return eachValue(
        column,
        node.key,
        "v.type NOT IN ('object','array') AND v.value IN (SELECT value FROM json_each(?))",
        [JSON.stringify(node.values.map(sqlValue))],
      );
    }
    case "range": {
      const conds: string[] = [];
      const params: (string | number)[] = [];
      for (const [name, sign] of [
        ["gt", ">"],
        ["gte", ">="],
        ["lt", "<"],
        ["lte", "<="],
      ] as const) {
        const bound = node[name];
        if (bound === undefined) continue;
        conds.push(`(${typeGuard(bound)} AND v.value ${sign} ?)`);
        params.push(bound);
      }
      return eachValue(column, node.key, conds.join(" AND "), params);
    }
    case "text":
      // instr over lower() is ASCII-only case folding; the predicate re-checks every result.
      return eachValue(column, node.key, "v.type = 'text' AND instr(lower(v.value), lower(?)) > 0", [node.text]);
    case "prefix":
      return eachValue(column, node.key, "v.type = 'text' AND substr(v.value, 1, ?) = ?", [
        node.prefix.length,
        node.prefix,
      ]);
    case "exists":
      return eachValue(column, node.key, "1", []);
    case "empty": {
      const inner = eachValue(column, node.key, "1", []);
      return { sql: `NOT ${inner.sql}`, params: inner.params };
    }
  }
}
