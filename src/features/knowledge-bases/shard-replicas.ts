import type { Env } from "../../env";
import { rpcStub } from "../../durable-objects/rpc-stub";
import { readReplicas } from "../../lib/config";
import type { KnowledgeBaseIndex } from "./index/knowledge-base-index";
import { replicaName } from "./index/replicas";

/** Round-robin over a shard's primary and replicas, per Worker isolate. */
let turn = 0;

/**
 * Which copy of a shard answers a read: 0 is the primary, r > 0 its replica r. Only reads that
 * need not see a write still in flight use this (queries); writes, progress and document reads
 * always go to the primary.
 */
export function pickCopy(env: Env): number {
  const replicas = readReplicas(env);
  if (replicas === 0) return 0;
  turn = (turn + 1) % (replicas + 1);
  return turn;
}

/** A replica's stub and the names it needs (its primary's, its own). */
export function replicaOf(
  env: Env,
  primary: string,
  replica: number,
): { stub: ReturnType<typeof rpcStub<KnowledgeBaseIndex>>; primary: string; self: string } {
  const self = replicaName(primary, replica);
  return { stub: rpcStub<KnowledgeBaseIndex>(env.KB_INDEX, self), primary, self };
}
