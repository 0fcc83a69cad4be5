import type { Env } from "../../env";
import { rpcStub } from "../../durable-objects/rpc-stub";
import { causeChain, logEvent } from "../../lib/log";
import type { KnowledgeBaseIndex } from "./index/knowledge-base-index";
import { shardName, splitKey, type ShardInfo, type ShardMap } from "./index/shard-map";
import type { StageKind, StageOf, StageResults } from "./index/shard-stages";
import { fromWire, type WireResults } from "./index/stage-wire";
import { pickCopy, replicaOf } from "./shard-replicas";

/** How long a shard may take over one step of a query before the answer goes on without it. */
export const SHARD_TIMEOUT_MS = 10_000;

/** A shard no longer owns the range the caller's map gives it (a split finished): read the map again. */
export class StaleShardMap extends Error {}

export interface MissingShard {
  shard: number;
  reason: "failed" | "timeout";
}

class ShardTimeout extends Error {}

/** A promise, or a ShardTimeout once `ms` pass without it settling. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ShardTimeout()), ms);
      }),
    ]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

function missingReason(error: unknown): MissingShard["reason"] {
  return error instanceof ShardTimeout ? "timeout" : "failed";
}

/**
 * One read (not a query step) asked of several shards in parallel: the answers of those that
 * answered, and the ones that failed or timed out, logged, so the caller says what is missing
 * rather than answering less without a word or failing as a whole for one shard.
 */
export async function askShards<T>(
  shards: number[],
  ask: (shard: number) => Promise<T>,
  what: string,
  timeoutMs = SHARD_TIMEOUT_MS,
): Promise<{ answers: [number, T][]; missing: MissingShard[] }> {
  const settled = await Promise.allSettled(shards.map((s) => withTimeout(ask(s), timeoutMs)));
  const answers: [number, T][] = [];
  const missing: MissingShard[] = [];
  settled.forEach((r, i) => {
    if (r.status === "fulfilled") answers.push([shards[i], r.value]);
    else {
      missing.push({ shard: shards[i], reason: missingReason(r.reason) });
      logEvent("warn", "knowledge_base_shard_missing", {
        shard: shards[i],
        reason: missingReason(r.reason),
        stage: what,
        cause: causeChain(r.reason),
      });
    }
  });
  return { answers, missing };
}

/** Merged-ranking keys (shard-map.ts globalKey) grouped by shard, as that shard's rowids. */
export function rowidsByShard(keys: Iterable<number>): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (const key of keys) {
    const { shard, rowid } = splitKey(key);
    const list = out.get(shard);
    if (list) list.push(rowid);
    else out.set(shard, [rowid]);
  }
  return out;
}

/** Two lists of missing shards as one, each shard once (its first reason). */
export function mergeMissing(...lists: MissingShard[][]): MissingShard[] {
  const out = new Map<number, MissingShard>();
  for (const list of lists) for (const m of list) if (!out.has(m.shard)) out.set(m.shard, m);
  return [...out.values()].sort((a, b) => a.shard - b.shard);
}

/**
 * One query's calls to a sharded knowledge base's shards: every step goes to the shards in
 * parallel. A shard that fails or times out is left out of the rest of the query and recorded,
 * so the answer says which part is missing (`partial`) instead of dropping it silently.
 */
export class ShardScatter {
  readonly missing = new Map<number, MissingShard["reason"]>();
  /** Each step this query made and the calls it took (a debug log line per query, sharded-index.ts). */
  readonly steps: { kind: StageKind; calls: number }[] = [];
  private readonly stubs = new Map<number, ReturnType<typeof rpcStub<KnowledgeBaseIndex>>>();

  constructor(
    private readonly env: Env,
    readonly kbId: string,
    readonly map: ShardMap,
    private readonly timeoutMs = SHARD_TIMEOUT_MS,
  ) {}

  /** The shards not yet found failing in this query. */
  live(): ShardInfo[] {
    return this.map.shards.filter((s) => !this.missing.has(s.index));
  }

  missingShards(): MissingShard[] {
    return [...this.missing].map(([shard, reason]) => ({ shard, reason }));
  }

  /** One step on some shards at once, under one timer for the step (not one per call: fewer timers per query). */
  private async round<K extends StageKind>(
    shards: ShardInfo[],
    requestFor: (shard: ShardInfo) => StageOf<K>,
  ): Promise<[ShardInfo, StageResults[K]][]> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ShardTimeout()), this.timeoutMs);
    });
    // Marked handled: with no call left racing it, its rejection must not count as unhandled.
    deadline.catch(() => undefined);
    try {
      const requests = shards.map(requestFor);
      if (requests.length) this.steps.push({ kind: requests[0].kind, calls: requests.length });
      const answers = await Promise.all(shards.map((s, i) => this.call(s, requests[i], deadline)));
      return shards.flatMap((s, i): [ShardInfo, StageResults[K]][] => {
        const answer = answers[i];
        return answer === undefined ? [] : [[s, answer]];
      });
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  private async call<K extends StageKind>(
    shard: ShardInfo,
    request: StageOf<K>,
    deadline: Promise<never>,
  ): Promise<StageResults[K] | undefined> {
    const stub = this.stubOf(shard.index);
    try {
      const answer = await Promise.race([
        this.fromReplica(shard, request).then((a) => a ?? stub.stage<K>({ lo: shard.lo, hi: shard.hi }, request)),
        deadline,
      ]);
      if (answer.stale) throw new StaleShardMap();
      return fromWire(request.kind, answer.result);
    } catch (error) {
      if (error instanceof StaleShardMap) throw error;
      const reason = missingReason(error);
      this.missing.set(shard.index, reason);
      logEvent("warn", "knowledge_base_shard_missing", {
        shard: shard.index,
        reason,
        stage: request.kind,
        cause: causeChain(error),
      });
      return undefined;
    }
  }

  /**
   * A shard's stub, made once per query rather than once per step: a query makes ~6 steps on
   * every shard, and the stub (its id hashed from the name) is the same for each of them.
   */
  private stubOf(index: number): ReturnType<typeof rpcStub<KnowledgeBaseIndex>> {
    let stub = this.stubs.get(index);
    if (!stub) {
      stub = rpcStub<KnowledgeBaseIndex>(this.env.KB_INDEX, shardName(this.kbId, index));
      this.stubs.set(index, stub);
    }
    return stub;
  }

  /** One step from one of the shard's replicas, or undefined: ask the primary (replica behind or failing). */
  private async fromReplica<K extends StageKind>(
    shard: ShardInfo,
    request: StageOf<K>,
  ): Promise<{ stale: true } | { stale: false; result: WireResults[K] } | undefined> {
    const copy = pickCopy(this.env);
    if (copy === 0) return undefined;
    const replica = replicaOf(this.env, shardName(this.kbId, shard.index), copy);
    try {
      const answer = await replica.stub.replicaStage<K>(
        replica.primary,
        replica.self,
        { lo: shard.lo, hi: shard.hi },
        request,
      );
      return "behind" in answer ? undefined : answer;
    } catch (error) {
      logEvent("warn", "knowledge_base_replica_failed", {
        shard: shard.index,
        replica: copy,
        cause: causeChain(error),
      });
      return undefined;
    }
  }

  /** One step on every live shard (the same request, or each its own); answers from the shards that answered. */
  async all<K extends StageKind>(
    request: StageOf<K> | ((shard: ShardInfo) => StageOf<K>),
  ): Promise<[ShardInfo, StageResults[K]][]> {
    return this.round(this.live(), (s) => (typeof request === "function" ? request(s) : request));
  }

  /** One step on some live shards (by index), each its own request. */
  async some<K extends StageKind>(
    indexes: Set<number>,
    request: (shard: ShardInfo) => StageOf<K>,
  ): Promise<[ShardInfo, StageResults[K]][]> {
    return this.round(
      this.live().filter((s) => indexes.has(s.index)),
      request,
    );
  }

  /** One step on the shards holding some rows (merged-ranking keys), each asked about its own rowids. */
  async byShard<K extends StageKind>(
    keys: number[],
    make: (rowids: number[], shard: ShardInfo) => StageOf<K>,
  ): Promise<[ShardInfo, StageResults[K]][]> {
    const rowids = rowidsByShard(keys);
    const shards = this.live().filter((s) => rowids.has(s.index));
    return this.round(shards, (s) => make(rowids.get(s.index) ?? [], s));
  }
}
