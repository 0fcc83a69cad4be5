import type { CopiedChunk } from "./shard-splitter";

/** A read replica of an index object (a shard's primary) is another object, named after it. */
export function replicaName(primary: string, replica: number): string {
  return `${primary}#replica-${replica}`;
}

/** Where a primary's data stands: a replica answers only at the same epoch and version. */
export interface ReplicaHead {
  epoch: string;
  version: number;
  backlog: { documents: number; chunks: number };
}

/** Documents changed after a version: each one's chunks now (none: it was deleted). */
export interface ReplicaChanges {
  epoch: string;
  /** The version these changes bring the replica to. */
  version: number;
  documents: string[];
  chunks: CopiedChunk[];
  /** More changes wait past `version`. */
  more: boolean;
}

/** Documents, and about how many chunks, a replica pulls per call, so one message stays small. */
const PULL_DOCUMENTS = 20;
const PULL_CHUNKS = 1_000;

const TABLES = `
  CREATE TABLE IF NOT EXISTS replica_meta (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), epoch TEXT NOT NULL, version INTEGER NOT NULL, self TEXT);
  CREATE TABLE IF NOT EXISTS replica_log (document_id TEXT PRIMARY KEY, version INTEGER NOT NULL);
  CREATE INDEX IF NOT EXISTS replica_log_version ON replica_log(version);
  CREATE TABLE IF NOT EXISTS replica_members (name TEXT PRIMARY KEY);
`;

function exists(sql: SqlStorage, table: string): boolean {
  return sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table).toArray().length > 0;
}

/**
 * The primary's side: a version that every write bumps and, per document, the version that last
 * touched it. Nothing is kept until a replica first asks (start), so an index without replicas
 * writes nothing more. The tables live outside the object's schema steps because they exist only
 * on primaries that have replicas, and `destroy` (deleteAll) drops them with everything else: a
 * new epoch then tells replicas to start over.
 */
export class ReplicaLog {
  private state: { epoch: string; version: number } | null | undefined;

  constructor(private readonly sql: SqlStorage) {}

  private load(): { epoch: string; version: number } | null {
    if (this.state === undefined)
      this.state = exists(this.sql, "replica_meta")
        ? (this.sql
            .exec<{ epoch: string; version: number }>("SELECT epoch, version FROM replica_meta WHERE singleton = 1")
            .toArray()[0] ?? null)
        : null;
    return this.state;
  }

  /** After deleteAll: the tables are gone. */
  forget(): void {
    this.state = undefined;
  }

  /** Documents a write changed (inside the write's transaction, so the version moves with it). */
  touched(documentIds: (string | null)[]): void {
    const state = this.load();
    const ids = [...new Set(documentIds.filter((d): d is string => d !== null))];
    if (!state || ids.length === 0) return;
    state.version += 1;
    this.sql.exec("UPDATE replica_meta SET version = ? WHERE singleton = 1", state.version);
    for (const id of ids)
      this.sql.exec("INSERT OR REPLACE INTO replica_log (document_id, version) VALUES (?, ?)", id, state.version);
  }

  /** Starts versioning (first replica call): every document held now is a change since version 0. */
  start(self: string): { epoch: string; version: number } {
    const state = this.load();
    if (state) return state;
    this.sql.exec(TABLES);
    // One version per document held, so a replica's first pulls can stop between any two.
    this.sql.exec(
      "INSERT OR REPLACE INTO replica_log (document_id, version) SELECT document_id, row_number() OVER (ORDER BY document_id) FROM (SELECT DISTINCT document_id FROM items WHERE document_id IS NOT NULL)",
    );
    const held = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM replica_log").one().n;
    const fresh = { epoch: crypto.randomUUID(), version: Math.max(1, held) };
    this.sql.exec(
      "INSERT INTO replica_meta (singleton, epoch, version, self) VALUES (1, ?, ?, ?)",
      fresh.epoch,
      fresh.version,
      self,
    );
    this.state = fresh;
    return fresh;
  }

  /** Changed documents after `since`, whole versions at a time, at most about PULL_DOCUMENTS. */
  changes(since: number): { documents: string[]; version: number; more: boolean } {
    const state = this.load();
    if (!state) return { documents: [], version: 0, more: false };
    const rows = this.sql
      .exec<{ document_id: string; version: number }>(
        "SELECT document_id, version FROM replica_log WHERE version > ? ORDER BY version LIMIT ?",
        since,
        PULL_DOCUMENTS + 1,
      )
      .toArray();
    // Documents past the chunk budget wait for the next pull (at least one document goes).
    let chunks = 0;
    const within = rows.findIndex((r, i) => {
      chunks += this.sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM items WHERE document_id = ?", r.document_id)
        .one().n;
      return i > 0 && chunks > PULL_CHUNKS;
    });
    const limit = within === -1 ? PULL_DOCUMENTS : Math.min(within, PULL_DOCUMENTS);
    if (rows.length <= limit) return { documents: rows.map((r) => r.document_id), version: state.version, more: false };
    // Stop before the version the first row left out starts, so a version's documents arrive together.
    const cut = rows[limit].version;
    let taken = rows.filter((r) => r.version < cut);
    if (taken.length === 0)
      taken = this.sql
        .exec<{ document_id: string; version: number }>(
          "SELECT document_id, version FROM replica_log WHERE version = ?",
          cut,
        )
        .toArray();
    const version = taken[taken.length - 1].version;
    return { documents: taken.map((r) => r.document_id), version, more: version < state.version };
  }

  register(replica: string): void {
    if (this.load()) this.sql.exec("INSERT OR IGNORE INTO replica_members (name) VALUES (?)", replica);
  }

  /** The replicas that have pulled from this primary, and the name they know it by. */
  members(): { self: string | null; names: string[] } {
    if (!this.load()) return { self: null, names: [] };
    const self = this.sql.exec<{ self: string | null }>("SELECT self FROM replica_meta WHERE singleton = 1").one().self;
    const names = this.sql.exec<{ name: string }>("SELECT name FROM replica_members").toArray();
    return { self, names: names.map((n) => n.name) };
  }

  version(): number {
    return this.load()?.version ?? 0;
  }
}

/** The replica's side: which primary epoch and version its copy stands at. */
export class ReplicaCopy {
  constructor(private readonly sql: SqlStorage) {}

  position(): { epoch: string; version: number } | null {
    if (!exists(this.sql, "replica_copy")) return null;
    return (
      this.sql
        .exec<{ epoch: string; version: number }>("SELECT epoch, version FROM replica_copy WHERE singleton = 1")
        .toArray()[0] ?? null
    );
  }

  /** Current: the same epoch and version as the primary's head. */
  current(head: ReplicaHead): boolean {
    const at = this.position();
    return at !== null && at.epoch === head.epoch && at.version === head.version;
  }

  /** Records the position reached (inside the transaction that applied the changes). */
  advance(epoch: string, version: number): void {
    this.sql.exec(
      "CREATE TABLE IF NOT EXISTS replica_copy (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), epoch TEXT NOT NULL, version INTEGER NOT NULL)",
    );
    this.sql.exec(
      "INSERT INTO replica_copy (singleton, epoch, version) VALUES (1, ?, ?) ON CONFLICT (singleton) DO UPDATE SET epoch = excluded.epoch, version = excluded.version",
      epoch,
      version,
    );
  }
}
