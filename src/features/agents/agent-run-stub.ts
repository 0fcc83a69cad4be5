import { and, eq, inArray } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { agentRuns } from "../../db/schema/agents";
import type { AgentRunInit, Decision } from "./agent-run-store";
import type { AgentRunView } from "./agent-run-view";

// The run object's stub and what the agent records need of it, in a module that imports no
// service back: agents.service (deleting an agent) and agent-runs.service both use it.

/**
 * The run object's RPC surface with its plain return shapes (RPC's inferred types turn the
 * JSON values typed `unknown` into `never`; the object returns exactly these).
 */
export type AgentRunActionResult = { ok: true; run: AgentRunView } | { ok: false; status: string; error: string };
export interface AgentRunApi {
  start(init: AgentRunInit): Promise<AgentRunView>;
  startStreaming(init: AgentRunInit): Promise<ReadableStream<Uint8Array>>;
  status(): Promise<AgentRunView | null>;
  waitUntilSettled(timeoutMs: number): Promise<AgentRunView | null>;
  decide(decisions: Decision[]): Promise<AgentRunActionResult>;
  terminate(): Promise<AgentRunActionResult>;
}

export function runStub(env: Env, runId: string): AgentRunApi {
  return env.AGENT_RUNS.get(env.AGENT_RUNS.idFromName(runId)) as unknown as AgentRunApi;
}

export async function terminateActiveAgentRuns(env: Env, agentId: string): Promise<void> {
  const active = await database(env)
    .select({ id: agentRuns.id })
    .from(agentRuns)
    .where(and(eq(agentRuns.agentId, agentId), inArray(agentRuns.status, ["running", "paused"])));
  await Promise.all(active.map((run) => runStub(env, run.id).terminate()));
}
