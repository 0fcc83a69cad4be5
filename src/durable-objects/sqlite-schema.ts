/**
 * One step of a Durable Object's SQLite schema. Steps are append-only: a released step is never
 * edited, a change is a new step at the end. The first step of each object uses
 * `CREATE ... IF NOT EXISTS` because objects created before versioning already hold its tables.
 */
export type SchemaMigration = (sql: SqlStorage) => void;

const VERSION_TABLE = "schema_version";

/** The version this object's storage is at (0: nothing applied, or storage just wiped). */
function storedVersion(sql: SqlStorage): number {
  sql.exec(
    `CREATE TABLE IF NOT EXISTS ${VERSION_TABLE} (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), version INTEGER NOT NULL)`,
  );
  return (
    sql.exec<{ version: number }>(`SELECT version FROM ${VERSION_TABLE} WHERE singleton = 1`).toArray()[0]?.version ?? 0
  );
}

/**
 * Applies the migrations this storage has not seen, in order, in one transaction with the new
 * version, so a crash leaves the storage at the old version or the new one, never between.
 * Synchronous, so an object may also call it right after `deleteAll()` to stand up again.
 */
export function applyMigrations(storage: DurableObjectStorage, migrations: readonly SchemaMigration[]): void {
  const current = storedVersion(storage.sql);
  // A newer schema than this code knows means an older build runs over newer data: refuse
  // rather than write rows the newer schema would misread.
  if (current > migrations.length)
    throw new Error(`storage schema version ${current} is newer than this code's ${migrations.length}`);
  if (current === migrations.length) return;
  storage.transactionSync(() => {
    for (const migration of migrations.slice(current)) migration(storage.sql);
    storage.sql.exec(
      `INSERT INTO ${VERSION_TABLE} (singleton, version) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET version = excluded.version`,
      migrations.length,
    );
  });
}

/**
 * Runs the migrations before the object serves its first call: inside `blockConcurrencyWhile`,
 * as Cloudflare advises for schema setup in the constructor, so no RPC sees a half-made schema.
 * `afterwards` is start-up work that needs the schema (repairing rows a restart left behind).
 */
export function ownSchema(
  ctx: DurableObjectState,
  migrations: readonly SchemaMigration[],
  afterwards?: () => void,
): void {
  void ctx.blockConcurrencyWhile(async () => {
    applyMigrations(ctx.storage, migrations);
    afterwards?.();
  });
}
