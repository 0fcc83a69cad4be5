import { env } from "cloudflare:test";
import { is } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import * as agents from "../../src/db/schema/agents";
import * as chatbots from "../../src/db/schema/chatbots";
import * as identity from "../../src/db/schema/identity";
import * as knowledgeBases from "../../src/db/schema/knowledge-bases";
import * as pipelines from "../../src/db/schema/pipelines";
import * as providers from "../../src/db/schema/providers";
import * as transformations from "../../src/db/schema/transformations";

/**
 * The D1 schema is written twice, by hand: as SQL migrations (what wrangler applies) and as the
 * drizzle schema (what the code queries). This suite reads the database the migrations built
 * (test/setup.ts applies them all) and compares every table with its drizzle definition: columns
 * (name, type, NOT NULL, default, primary key), unique columns and named indexes. Any
 * difference, including a table on one side only, fails with a line naming it.
 */

/** Tables of the database that are not Loom's records. */
const NOT_RECORDS = new Set(["d1_migrations", "_cf_KV", "_cf_METADATA"]);

function drizzleTables(): SQLiteTable[] {
  const modules = [agents, chatbots, identity, knowledgeBases, pipelines, providers, transformations];
  return modules.flatMap((m) => Object.values(m).filter((v): v is SQLiteTable => is(v, SQLiteTable)));
}

interface ColumnShape {
  type: string;
  notNull: boolean;
  default: string | null;
  /** 1-based position in the primary key, 0 when not part of it. */
  pk: number;
  unique: boolean;
}

interface TableShape {
  columns: Record<string, ColumnShape>;
  /** Named indexes (CREATE INDEX): name -> "unique? (col, col)". */
  indexes: Record<string, string>;
}

/** A drizzle default as SQLite reports it in `dflt_value`. */
function sqlDefault(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "boolean") return value ? "1" : "0";
  if (typeof value === "number") return String(value);
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return `'${text.replaceAll("'", "''")}'`;
}

function fromDrizzle(table: SQLiteTable): TableShape {
  const config = getTableConfig(table);
  const compositeKey = config.primaryKeys[0]?.columns.map((c) => c.name) ?? [];
  const columns: Record<string, ColumnShape> = {};
  for (const column of config.columns) {
    const keyPosition = column.primary ? 1 : compositeKey.indexOf(column.name) + 1;
    columns[column.name] = {
      type: column.getSQLType().toLowerCase(),
      // SQLite reports a PRIMARY KEY TEXT column as nullable unless it says NOT NULL.
      notNull: column.notNull && !(column.primary && column.getSQLType() === "text"),
      default: column.hasDefault ? sqlDefault(column.default) : null,
      pk: keyPosition,
      unique: column.isUnique,
    };
  }
  const indexes: Record<string, string> = {};
  for (const index of config.indexes) {
    const names = index.config.columns.map((c) => ("name" in c ? String(c.name) : "?"));
    indexes[index.config.name] = `${index.config.unique ? "unique " : ""}(${names.join(", ")})`;
  }
  return { columns, indexes };
}

async function fromDatabase(table: string): Promise<TableShape> {
  const info = await env.DB.prepare(`PRAGMA table_info("${table}")`).all<{
    name: string;
    type: string;
    notnull: number;
    dflt_value: string | null;
    pk: number;
  }>();
  const list = await env.DB.prepare(`PRAGMA index_list("${table}")`).all<{
    name: string;
    unique: number;
    origin: string;
  }>();
  const uniqueColumns = new Set<string>();
  const indexes: Record<string, string> = {};
  for (const index of list.results) {
    const cols = await env.DB.prepare(`PRAGMA index_info("${index.name}")`).all<{ name: string }>();
    const names = cols.results.map((c) => c.name);
    // A column's UNIQUE constraint shows as an automatic index; the primary key's is in table_info.
    if (index.origin === "u" && names.length === 1) uniqueColumns.add(names[0]);
    else if (index.origin === "c") indexes[index.name] = `${index.unique ? "unique " : ""}(${names.join(", ")})`;
  }
  const columns: Record<string, ColumnShape> = {};
  for (const column of info.results) {
    columns[column.name] = {
      type: column.type.toLowerCase(),
      notNull: column.notnull === 1,
      default: column.dflt_value,
      pk: column.pk,
      unique: uniqueColumns.has(column.name),
    };
  }
  return { columns, indexes };
}

/** Every difference between the two shapes of one table, one line each. */
function differences(table: string, migrated: TableShape, declared: TableShape): string[] {
  const out: string[] = [];
  const names = new Set([...Object.keys(migrated.columns), ...Object.keys(declared.columns)]);
  for (const name of names) {
    const [m, d] = [migrated.columns[name], declared.columns[name]];
    if (!m) out.push(`${table}.${name}: in the drizzle schema, not in the migrations`);
    else if (!d) out.push(`${table}.${name}: in the migrations, not in the drizzle schema`);
    else
      for (const key of Object.keys(m) as (keyof ColumnShape)[])
        if (m[key] !== d[key])
          out.push(`${table}.${name}: ${key} is ${String(m[key])} in the migrations, ${String(d[key])} in drizzle`);
  }
  const indexNames = new Set([...Object.keys(migrated.indexes), ...Object.keys(declared.indexes)]);
  for (const name of indexNames)
    if (migrated.indexes[name] !== declared.indexes[name])
      out.push(
        `${table} index ${name}: ${migrated.indexes[name] ?? "absent"} in the migrations, ${declared.indexes[name] ?? "absent"} in drizzle`,
      );
  return out;
}

describe("D1: the migrations and the drizzle schema agree", () => {
  it("every table, column, primary key, default and index is the same on both sides", async () => {
    const declared = new Map(drizzleTables().map((t) => [getTableConfig(t).name, t]));
    const migrated = (
      await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all<{
        name: string;
      }>()
    ).results
      .map((r) => r.name)
      .filter((name) => !NOT_RECORDS.has(name));
    const problems: string[] = [];
    for (const name of migrated)
      if (!declared.has(name)) problems.push(`${name}: a table of the migrations with no drizzle definition`);
    for (const name of declared.keys())
      if (!migrated.includes(name)) problems.push(`${name}: a drizzle table no migration creates`);
    for (const [name, table] of declared)
      if (migrated.includes(name)) problems.push(...differences(name, await fromDatabase(name), fromDrizzle(table)));
    expect(problems).toEqual([]);
    // Not vacuous: the tables compared are the ones the code uses.
    expect(declared.size).toBeGreaterThanOrEqual(20);
  });

  it("a column whose migration default is a JSON object or array is read in drizzle's JSON mode, so no row needs parsing", async () => {
    const handParsed: string[] = [];
    let jsonColumns = 0;
    for (const table of drizzleTables()) {
      const config = getTableConfig(table);
      const migrated = await fromDatabase(config.name);
      for (const column of config.columns) {
        if (!["'{}'", "'[]'"].includes(migrated.columns[column.name]?.default ?? "")) continue;
        jsonColumns++;
        if (column.columnType !== "SQLiteTextJson") handParsed.push(`${config.name}.${column.name}`);
      }
    }
    expect(handParsed).toEqual([]);
    expect(jsonColumns).toBeGreaterThan(10);
  });
});
