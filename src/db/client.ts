import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { Env } from "../env";

export type Database = DrizzleD1Database;

/** The one place that turns the D1 binding into a drizzle client. */
export function database(env: Env): Database {
  return drizzle(env.DB);
}
