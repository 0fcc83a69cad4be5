import type { Env } from "../../../env";
import { rpcStub } from "../../../durable-objects/rpc-stub";
import { ReplicaCopy, ReplicaLog, type ReplicaChanges, type ReplicaHead } from "./replicas";
import type { CopiedChunk } from "./shard-splitter";
import type { KnowledgeBaseIndex } from "./knowledge-base-index";

/** How long a primary waits for one replica to take a write before answering without it. */
const ANNOUNCE_TIMEOUT_MS = 2_000;

export interface ReplicationHost {
  sql: SqlStorage;
  storage: DurableObjectStorage;
  env: Env;
  readDocuments(documentIds: string[]): CopiedChunk[];
  backlog(): { documents: number; chunks: number };
  /** Inside a transaction: drop these documents' rows and any row holding one of these rowids or chunk ids. */
  removeForCopy(documentIds: string[], chunks: CopiedChunk[]): void;
  writeCopies(chunks: CopiedChunk[]): void;
  /** Drops everything (a replica whose primary started a new epoch starts over). */
  reset(): Promise<void>;
  waitUntil(promise: Promise<unknown>): void;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("replica timed out")), ms);
    }),
  ]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}

/**
 * Read replicas of an index object (docs/knowledge-bases.md, "Read replicas"). The primary keeps a
 * version and which documents each version changed (ReplicaLog); a replica pulls the changed
 * documents' exact copies (shard-copies.ts: rowids, token counts, int8 vectors), so it ranks as the
 * primary does. A replica answers a read only after asking the primary for its head and finding
 * its own copy at that very version; otherwise it answers `behind` (the Worker asks the primary)
 * and catches up in the background. After a write the primary pushes it to the replicas that have
 * pulled before, waiting a short time, so they are usually current when the next read comes.
 */
export class Replication {
  readonly log: ReplicaLog;
  private readonly copy: ReplicaCopy;
  private syncing: Promise<void> | undefined;
  /** Reads this object answered as a replica, and ones it refused as behind (tests, operators). */
  readonly counts = { served: 0, behind: 0 };

  constructor(private readonly host: ReplicationHost) {
    this.log = new ReplicaLog(host.sql);
    this.copy = new ReplicaCopy(host.sql);
  }

  private stub(name: string) {
    return rpcStub<KnowledgeBaseIndex>(this.host.env.KB_INDEX, name);
  }

  // ---------- primary ----------

  head(self: string): ReplicaHead {
    const { epoch, version } = this.log.start(self);
    return { epoch, version, backlog: this.host.backlog() };
  }

  changes(self: string, since: { epoch: string; version: number } | null, replica: string): ReplicaChanges {
    const { epoch } = this.log.start(self);
    this.log.register(replica);
    const from = since && since.epoch === epoch ? since.version : 0;
    const { documents, version, more } = this.log.changes(from);
    return { epoch, version, documents, chunks: this.host.readDocuments(documents), more };
  }

  /** After a write: every replica that has pulled before pulls now (best effort, short wait). */
  async announce(): Promise<void> {
    const { self, names } = this.log.members();
    if (self === null || names.length === 0) return;
    await Promise.all(
      names.map((name) =>
        withTimeout(this.stub(name).replicaSync(self, name), ANNOUNCE_TIMEOUT_MS).catch(() => undefined),
      ),
    );
  }

  /** Before the primary drops everything: its replicas go too. */
  async destroyMembers(): Promise<void> {
    const { names } = this.log.members();
    await Promise.all(
      names.map((name) =>
        this.stub(name)
          .destroy()
          .catch(() => undefined),
      ),
    );
  }

  // ---------- replica ----------

  /** Pulls until this copy stands at the primary's version (one pull at a time). */
  sync(primary: string, self: string): Promise<void> {
    this.syncing ??= this.pull(primary, self).finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  private async pull(primary: string, self: string): Promise<void> {
    const stub = this.stub(primary);
    for (let rounds = 0; rounds < 10_000; rounds++) {
      const at = this.copy.position();
      const changes = await stub.replicaChanges(primary, at, self);
      if (at !== null && at.epoch !== changes.epoch) {
        // The primary was wiped (its knowledge base deleted and made again): start over.
        await this.host.reset();
        continue;
      }
      this.host.storage.transactionSync(() => {
        this.host.removeForCopy(changes.documents, changes.chunks);
        this.host.writeCopies(changes.chunks);
        this.copy.advance(changes.epoch, changes.version);
      });
      if (!changes.more) return;
    }
  }

  /**
   * Whether this replica may answer now: its copy is at the primary's head. When it is not, it
   * starts catching up and the caller asks the primary instead.
   */
  check(head: ReplicaHead, primary: string, self: string): boolean {
    if (this.copy.current(head)) {
      this.counts.served += 1;
      return true;
    }
    this.counts.behind += 1;
    this.host.waitUntil(this.sync(primary, self).catch(() => undefined));
    return false;
  }
}
