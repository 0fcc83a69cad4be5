import type { Env } from "../../env";
import type { KnowledgeBaseIndex } from "./index/knowledge-base-index";
import { rpcStub, type RpcSurface } from "../../durable-objects/rpc-stub";

export type KnowledgeBaseIndexRpc = RpcSurface<KnowledgeBaseIndex>;

/** The one place that reaches a knowledge base's Durable Object. */
export function indexStub(env: Env, kbId: string): KnowledgeBaseIndexRpc {
  return rpcStub(env.KB_INDEX, kbId);
}
