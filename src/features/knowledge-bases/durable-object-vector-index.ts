import type { Env } from "../../env";
import { ShardedKnowledgeBaseIndex } from "./sharded-index";

export type KnowledgeBaseIndexRpc = ShardedKnowledgeBaseIndex;

/** The one place that reaches a knowledge base's index: its shards, through one router (sharded-index.ts). */
export function indexStub(env: Env, kbId: string): KnowledgeBaseIndexRpc {
  return new ShardedKnowledgeBaseIndex(env, kbId);
}
