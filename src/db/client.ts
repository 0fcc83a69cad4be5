import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { Env } from "../env";
import { conflict } from "../lib/errors";

export type Database = DrizzleD1Database;

/** The one place that turns the D1 binding into a drizzle client. */
export function database(env: Env): Database {
  return drizzle(env.DB);
}

/**
 * D1 as seen through a Sessions API session (`withSession`). Drizzle takes a D1Database; a session
 * answers prepare() and batch() the same way, and exec()/dump() (never used through this client)
 * stay on the primary.
 */
function sessionDatabase(db: D1Database, session: D1DatabaseSession): D1Database {
  return {
    prepare: (query) => session.prepare(query),
    batch: (statements) => session.batch(statements),
    exec: (query) => db.exec(query),
    dump: () => db.dump(),
    withSession: (constraint) => db.withSession(constraint),
  };
}

/**
 * A read that does not need the newest write: it runs on a D1 session that may answer from the
 * nearest read replica ("first-unconstrained"). A replica can lag the primary, so what it cannot
 * find (a row written moments ago, e.g. an API key just created) is read again from the primary:
 * a miss is never stale, only a hit can be (by the replica's lag: a key revoked or a knowledge
 * base deleted that recently may still be found). Writes and reads that must see the caller's own
 * last write use database(env), which is the primary. Only with D1_READ_REPLICAS=on (read
 * replication is switched on per database, in the dashboard or API).
 */
export async function readNearest<T>(env: Env, read: (db: Database) => Promise<T[]>): Promise<T[]> {
  // Off unless the database replicates: a session then buys nothing, and locally it costs ~3.5 ms a
  // read (BENCHMARKS.md, "Speed").
  if (env.D1_READ_REPLICAS !== "on") return read(database(env));
  const rows = await read(drizzle(sessionDatabase(env.DB, env.DB.withSession("first-unconstrained"))));
  return rows.length ? rows : read(database(env));
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
