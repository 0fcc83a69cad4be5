import type { Env } from "../../../env";
import { intSetting } from "../../../lib/config";
import { documentHash, HASH_SPACE, owns, SINGLE_SHARD, type ShardInfo, type ShardMap } from "./shard-map";

/** Test and operator overrides of when and how a shard splits (kept by each shard, passed on to the shards it makes). */
export interface ShardConfig {
  /** Chunks above which this shard splits (default KB_SHARD_SPLIT_CHUNKS). */
  splitChunks?: number;
  /** Chunks copied per step of a split. */
  batchChunks?: number;
  /** Steps run only when called (splitStep), never from the alarm: tests drive a split one step at a time. */
  manual?: boolean;
}

/** Where this shard stands: its knowledge base, its number, the document hashes it owns, and the ranges it gave away. */
export interface ShardSelf {
  kbId: string | null;
  index: number;
  lo: number;
  hi: number;
  children: ShardInfo[];
  config: ShardConfig;
}

/** A split in progress: documents with hashes in [mid, hi) are copied to `target`, then the map moves them there (mid: the chunks' median). */
interface SplitState {
  target: number;
  mid: number;
  phase: "copying" | "sealed";
}

/** A chunk as a split copies it: everything its row holds, its rowid and its vector. */
export interface CopiedChunk {
  rowid: number;
  id: string;
  documentId: string;
  position: number;
  text: string | null;
  metadata: string;
  tokens: number | null;
  values?: number[];
}

export type SplitProgress = "idle" | "working" | "waiting";

/** What the splitter needs from its object: chunk counts and reads, and its peers. */
export interface SplitterHost {
  sql: SqlStorage;
  storage: DurableObjectStorage;
  env: Env;
  readDocuments(documentIds: string[]): CopiedChunk[];
  /** The small originals kept beside these documents' chunks (small-document-writer.ts), to move with them. */
  readOriginals(documentIds: string[]): CopiedOriginal[];
  removeDocuments(documentIds: string[]): void;
  peer(kbId: string, index: number): SplitPeer;
}

/** A small document's original file as kept by its shard. */
export interface CopiedOriginal {
  documentId: string;
  bytes: Uint8Array;
}

export interface SplitPeer {
  initShard(self: ShardSelf): Promise<void>;
  acceptCopies(documentIds: string[], chunks: CopiedChunk[], originals: CopiedOriginal[]): Promise<void>;
  allocateShard(): Promise<number>;
  commitSplit(from: number, to: number, mid: number): Promise<ShardMap>;
}

/** Default chunks per shard before it splits: half of what one object's memory holds (200k int8 vectors at 256 dims). */
export const DEFAULT_SPLIT_CHUNKS = 100_000;
/** Chunks per copy call: with their vectors about 4 MB, well under the RPC message cap. */
const DEFAULT_BATCH_CHUNKS = 500;

/**
 * A shard's place in its knowledge base and its online split. A shard past its threshold cuts
 * its hash range where half its chunks lie on each side: the upper part's documents are copied to a new shard in steps while this shard
 * keeps answering for all of them (writes to a document already copied mark it to copy again);
 * once nothing is left, the shard seals the range (writes to it go to the new shard), shard 0
 * commits the new map, and this shard drops the copied documents the moment a caller shows it
 * the new map. A caller still holding the old map is told it is stale and starts over, so no
 * query counts a document twice or misses it.
 */
export class ShardSplitter {
  private running = false;

  constructor(private readonly host: SplitterHost) {}

  /**
   * shard_state as last read: every step of a sharded query checks its range (check), and reading
   * and parsing it there each time was a measurable share of a shard's work per step. Emptied by
   * every write and after each transaction here, so a rolled-back write never stays in it.
   */
  private readonly known = new Map<string, unknown>();

  private read<T>(key: string): T | undefined {
    if (this.known.has(key)) return this.known.get(key) as T | undefined;
    const row = this.host.sql.exec<{ value: string }>("SELECT value FROM shard_state WHERE key = ?", key).toArray()[0];
    const value = row ? (JSON.parse(row.value) as T) : undefined;
    this.known.set(key, value);
    return value;
  }

  /** Drops what read() holds (the object's storage was wiped). */
  forget(): void {
    this.known.clear();
  }

  private transaction(body: () => void): void {
    try {
      this.host.storage.transactionSync(body);
    } finally {
      this.known.clear();
    }
  }

  private write(key: string, value: unknown): void {
    this.known.clear();
    if (value === undefined) this.host.sql.exec("DELETE FROM shard_state WHERE key = ?", key);
    else
      this.host.sql.exec("INSERT OR REPLACE INTO shard_state (key, value) VALUES (?, ?)", key, JSON.stringify(value));
  }

  self(): ShardSelf {
    return this.read<ShardSelf>("self") ?? { kbId: null, index: 0, lo: 0, hi: HASH_SPACE, children: [], config: {} };
  }

  private split(): SplitState | undefined {
    return this.read<SplitState>("split");
  }

  /** Remembers the knowledge base this object serves (shard 0 learns it from its first write). */
  noteKb(kbId: string): void {
    const self = this.self();
    if (self.kbId === null) this.write("self", { ...self, kbId });
  }

  init(self: ShardSelf): void {
    this.write("self", self);
  }

  configure(config: ShardConfig): void {
    this.write("self", { ...this.self(), config });
  }

  // ---------- the map (shard 0) ----------

  map(): ShardMap {
    return this.read<ShardMap>("map") ?? SINGLE_SHARD;
  }

  allocate(): number {
    const next = this.read<number>("next_index") ?? 1;
    this.write("next_index", next + 1);
    return next;
  }

  commit(from: number, to: number, mid: number): ShardMap {
    const map = this.map();
    const source = map.shards.find((s) => s.index === from);
    if (!source || map.shards.some((s) => s.index === to)) return map;
    const next: ShardMap = {
      version: map.version + 1,
      shards: [
        ...map.shards.map((s) => (s.index === from ? { ...s, hi: mid } : s)),
        { index: to, lo: mid, hi: source.hi },
      ],
    };
    this.write("map", next);
    return next;
  }

  // ---------- routing ----------

  /**
   * Whether a caller's view of this shard's range is current. A caller showing the range after
   * this shard's sealed split finishes it here (drops the copied documents) first; one showing an
   * older, wider range than this shard now owns is stale.
   */
  check(range: { lo: number; hi: number }): "ok" | "stale" {
    const self = this.self();
    if (range.lo === self.lo && range.hi === self.hi) return "ok";
    const split = this.split();
    if (split?.phase === "sealed" && range.lo === self.lo && range.hi === split.mid) {
      this.cutover(split);
      return "ok";
    }
    return "stale";
  }

  /** The shard a write to this document belongs to when it is no longer this one (sealed, or split before the caller knew). */
  elsewhere(documentId: string): number | undefined {
    const self = this.self();
    const split = this.split();
    if (split?.phase === "sealed" && owns({ lo: split.mid, hi: self.hi }, documentId)) return split.target;
    if (owns(self, documentId)) return undefined;
    return self.children.find((c) => owns(c, documentId))?.index;
  }

  /** Writes to documents being copied: they are copied (again) before the split finishes. */
  touched(documentIds: string[]): void {
    const split = this.split();
    if (split?.phase !== "copying") return;
    const self = this.self();
    for (const id of documentIds)
      if (owns({ lo: split.mid, hi: self.hi }, id))
        this.host.sql.exec("INSERT OR IGNORE INTO split_documents (document_id) VALUES (?)", id);
  }

  // ---------- splitting ----------

  private threshold(self: ShardSelf): number {
    return self.config.splitChunks ?? intSetting(this.host.env.KB_SHARD_SPLIT_CHUNKS, DEFAULT_SPLIT_CHUNKS);
  }

  /** Whether the alarm should run a split step now. */
  wantsStep(): boolean {
    const self = this.self();
    if (self.config.manual || self.kbId === null) return false;
    return this.split() !== undefined || this.overThreshold(self);
  }

  isManual(): boolean {
    return this.self().config.manual === true;
  }

  private overThreshold(self: ShardSelf): boolean {
    if (self.hi - self.lo < 2) return false;
    const chunks = this.host.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n;
    // A shard found unsplittable (one document holds most of it) is looked at again only once it grows.
    return chunks > this.threshold(self) && chunks > (this.read<number>("unsplittable_at") ?? -1);
  }

  /**
   * Where to cut this shard's range so each side holds about half its chunks: the hash of the
   * document at which the chunks counted in hash order pass half. Undefined when no cut leaves
   * chunks on both sides (one document holds the shard), so it does not split into empty shards.
   */
  private midpoint(self: ShardSelf): number | undefined {
    const documents = this.host.sql
      .exec<{ d: string; n: number }>(
        "SELECT document_id AS d, count(*) AS n FROM items WHERE document_id IS NOT NULL GROUP BY document_id",
      )
      .toArray()
      .map((r) => ({ hash: documentHash(r.d), n: r.n }))
      .sort((a, b) => a.hash - b.hash);
    const total = documents.reduce((a, d) => a + d.n, 0);
    let below = 0;
    let previous = -1;
    for (const d of documents) {
      // A cut at a hash another document below shares would move that one too: cut between distinct hashes only.
      if (below > 0 && below + d.n / 2 >= total / 2 && d.hash > previous && d.hash > self.lo) return d.hash;
      below += d.n;
      previous = d.hash;
    }
    return undefined;
  }

  /** One step of a split (starting one when this shard is past its threshold); one at a time. */
  async step(): Promise<SplitProgress> {
    if (this.running) return "working";
    this.running = true;
    try {
      return await this.advance();
    } finally {
      this.running = false;
    }
  }

  private async advance(): Promise<SplitProgress> {
    const self = this.self();
    const split = this.split();
    if (self.kbId === null) return "idle";
    const kbId = self.kbId;
    if (!split) {
      if (!this.overThreshold(self)) return "idle";
      const mid = this.midpoint(self);
      if (mid === undefined) {
        this.write("unsplittable_at", this.host.sql.exec<{ n: number }>("SELECT count(*) AS n FROM items").one().n);
        return "idle";
      }
      const shard0 = this.host.peer(kbId, 0);
      const target = self.index === 0 ? this.allocate() : await shard0.allocateShard();
      await this.host.peer(kbId, target).initShard({
        kbId,
        index: target,
        lo: mid,
        hi: self.hi,
        children: [],
        config: self.config,
      });
      this.transaction(() => {
        const documents = this.host.sql
          .exec<{ d: string }>("SELECT DISTINCT document_id AS d FROM items WHERE document_id IS NOT NULL")
          .toArray();
        for (const { d } of documents)
          if (owns({ lo: mid, hi: self.hi }, d))
            this.host.sql.exec("INSERT OR IGNORE INTO split_documents (document_id) VALUES (?)", d);
        this.write("split", { target, mid, phase: "copying" } satisfies SplitState);
      });
      return "working";
    }
    if (split.phase === "copying") {
      const batch = this.nextBatch(self.config.batchChunks ?? DEFAULT_BATCH_CHUNKS);
      if (batch.length) {
        const chunks = this.host.readDocuments(batch);
        const originals = this.host.readOriginals(batch);
        for (const id of batch) this.host.sql.exec("DELETE FROM split_documents WHERE document_id = ?", id);
        await this.host.peer(kbId, split.target).acceptCopies(batch, chunks, originals);
        return "working";
      }
      // Documents still indexing in steps finish here first (each step marks them to copy).
      const pending = this.host.sql
        .exec<{ d: string }>("SELECT DISTINCT document_id AS d FROM pending")
        .toArray()
        .some(({ d }) => owns({ lo: split.mid, hi: self.hi }, d));
      if (pending) return "waiting";
      this.write("split", { ...split, phase: "sealed" } satisfies SplitState);
    }
    const shard0 = this.host.peer(kbId, 0);
    const map =
      self.index === 0
        ? this.commit(self.index, split.target, split.mid)
        : await shard0.commitSplit(self.index, split.target, split.mid);
    const mine = map.shards.find((s) => s.index === self.index);
    const current = this.split();
    if (mine && mine.hi === split.mid && current?.phase === "sealed") this.cutover(current);
    return "working";
  }

  /** Document ids to copy next: whole documents, about `chunks` chunks in all (at least one document). */
  private nextBatch(chunks: number): string[] {
    const out: string[] = [];
    let size = 0;
    const rows = this.host.sql
      .exec<{ d: string; n: number }>(
        "SELECT s.document_id AS d, (SELECT count(*) FROM items WHERE document_id = s.document_id) AS n FROM split_documents s LIMIT 500",
      )
      .toArray();
    for (const { d, n } of rows) {
      if (out.length && size + n > chunks) break;
      out.push(d);
      size += n;
    }
    return out;
  }

  /** The split is in the map: the copied documents leave this shard, which now owns the lower half. */
  private cutover(split: SplitState): void {
    const self = this.self();
    this.transaction(() => {
      const moved = this.host.sql
        .exec<{ d: string }>("SELECT DISTINCT document_id AS d FROM items WHERE document_id IS NOT NULL")
        .toArray()
        .map((r) => r.d)
        .filter((d) => {
          const h = documentHash(d);
          return h >= split.mid && h < self.hi;
        });
      this.host.removeDocuments(moved);
      this.host.sql.exec("DELETE FROM split_documents");
      this.write("split", undefined);
      this.write("self", {
        ...self,
        hi: split.mid,
        children: [...self.children, { index: split.target, lo: split.mid, hi: self.hi }],
      } satisfies ShardSelf);
    });
  }
}
