import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { Env } from "../env";
import { conflict } from "../lib/errors";

export type Database = DrizzleD1Database;

/** The one place that turns the D1 binding into a drizzle client. */
export function database(env: Env): Database {
  return drizzle(env.DB);
}

/**
 * Runs a write and turns a UNIQUE constraint violation into a 409 with `message`, so a name
 * taken between our check and the write still answers the documented conflict.
 */
export async function writeUnique<T>(write: () => Promise<T>, message: string): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (String(error).includes("UNIQUE")) throw conflict(message);
    throw error;
  }
}
