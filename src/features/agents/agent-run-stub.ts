import { and, eq, inArray } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { agentRuns } from "../../db/schema/agents";
import type { AgentRunObject } from "../../durable-objects/agent-run-object";
import { rpcStub, type RpcSurface } from "../../durable-objects/rpc-stub";

// The run object's stub and what the agent records need of it, in a module that imports no
// service back: agents.service (deleting an agent) and agent-runs.service both use it.

export type { AgentRunActionResult } from "../../durable-objects/agent-run-object";

/** The run object, typed by its class (see rpc-stub.ts). */
export function runStub(env: Env, runId: string): RpcSurface<AgentRunObject> {
  return rpcStub(env.AGENT_RUNS, runId);
}

export async function terminateActiveAgentRuns(env: Env, agentId: string): Promise<void> {
  const active = await database(env)
    .select({ id: agentRuns.id })
    .from(agentRuns)
    .where(and(eq(agentRuns.agentId, agentId), inArray(agentRuns.status, ["running", "paused"])));
  await Promise.all(active.map((run) => runStub(env, run.id).terminate()));
}
