import { and, desc, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { agentHistory, agentRuns } from "../../db/schema/agents";
import { users } from "../../db/schema/identity";
import { AppError, badRequest, conflict, forbidden, notFound } from "../../lib/errors";
import { newId, toHex } from "../../lib/ids";
import { NodeFailure } from "../pipelines/pipeline-services";
import { storedDefinition } from "./agent-definition";
import type { AgentRunInit, AgentRunRecord, Decision } from "./agent-run-store";
import type { AgentRunView } from "./agent-run-view";
import type { AgentRow } from "./agents.records";
import { agentAccess } from "./agents.service";

/** How deep agents may call agents (an agent tool inside an agent tool ...). */
export const MAX_AGENT_DEPTH = 3;
/** Longest a non-streaming run request waits before answering the run id and its state. */
export const RUN_WAIT_MS = 120_000;

export { runStub, type AgentRunActionResult } from "./agent-run-stub";
import { runStub } from "./agent-run-stub";

/**
 * The agent as a runner may use it: same organization and visible to the caller. A published
 * agent of another organization is not runnable (import it first): 404, as for any agent the
 * caller cannot see.
 */
export async function runnableAgent(
  env: Env,
  auth: AuthContext,
  agentId: string,
): Promise<{ row: AgentRow; canEdit: boolean }> {
  const access = await agentAccess(env, auth, agentId);
  if (access.row.orgId !== auth.orgId || !access.canRun) throw notFound("agent");
  return { row: access.row, canEdit: access.canEdit };
}

/** The agent owner's current rights: tools act as the owner, never as the caller or a publisher. */
async function ownerAuth(env: Env, row: AgentRow): Promise<AuthContext> {
  const owner = (
    await database(env)
      .select({ role: users.role, suspended: users.suspended })
      .from(users)
      .where(and(eq(users.id, row.ownerId), eq(users.orgId, row.orgId)))
      .limit(1)
  )[0];
  if (!owner || owner.suspended) throw forbidden("the agent's owner can no longer use it; an admin can duplicate it");
  return { userId: row.ownerId, orgId: row.orgId, role: owner.role, via: "token" };
}

export interface RunRequest {
  inputs: Record<string, unknown>;
  additionalInstructions: string | null;
}

async function prepare(
  env: Env,
  row: AgentRow,
  startedBy: string,
  request: RunRequest,
  runId: string,
  depth: number,
): Promise<AgentRunInit> {
  const definition = storedDefinition(row.definition);
  const declared = Object.values(definition.inputs).map((i) => i.name);
  const unknown = Object.keys(request.inputs).filter((name) => declared.length > 0 && !declared.includes(name));
  if (unknown.length)
    throw badRequest(
      `inputs.${unknown[0]}: the agent has no input of that name; its inputs are ${declared.join(", ")}`,
    );
  if (Object.keys(request.inputs).length === 0)
    throw badRequest(`inputs: give the agent at least one input${declared.length ? ` (${declared.join(", ")})` : ""}`);
  return {
    runId,
    agentId: row.id,
    agentName: row.name,
    toolAuth: await ownerAuth(env, row),
    startedBy,
    definition,
    inputs: request.inputs,
    additionalInstructions: request.additionalInstructions,
    depth,
  };
}

async function recordStart(
  env: Env,
  auth: AuthContext,
  row: AgentRow,
  runId: string,
  parentRunId: string | null,
): Promise<void> {
  const db = database(env);
  const now = new Date().toISOString();
  await db.batch([
    db
      .insert(agentRuns)
      .values({
        id: runId,
        agentId: row.id,
        orgId: row.orgId,
        startedBy: auth.userId,
        parentRunId,
        status: "running",
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing(),
    db.insert(agentHistory).values({
      id: newId(),
      userId: auth.userId,
      agentId: row.id,
      agentName: row.name,
      action: "run",
      runId,
      createdAt: now,
    }),
  ]);
}

export async function startAgentRun(
  env: Env,
  auth: AuthContext,
  agentId: string,
  request: RunRequest,
): Promise<AgentRunInit> {
  const { row } = await runnableAgent(env, auth, agentId);
  const init = await prepare(env, row, auth.userId, request, newId(), 0);
  await recordStart(env, auth, row, init.runId, null);
  return init;
}

export async function runAndWait(env: Env, init: AgentRunInit, waitMs = RUN_WAIT_MS): Promise<AgentRunView> {
  const stub = runStub(env, init.runId);
  const started = await stub.start(init);
  return (await stub.waitUntilSettled(waitMs)) ?? started;
}

/** The answer of a run request, in the pipeline run's shape plus the steps. */
export function agentRunAnswer(view: AgentRunView) {
  const common = { run_id: view.run_id, state: view.status, steps: view.steps, usage: view.usage };
  if (view.status === "failed" || view.status === "terminated")
    return {
      status: "failed" as const,
      ...common,
      error: view.error ?? view.status,
      outputs: view.outputs,
      pending: view.pending,
    };
  return { status: "success" as const, ...common, outputs: view.outputs, pending: view.pending };
}

/** Runs another agent as a tool, with the parent's owner's rights; the child's run id is derived from the call, so a retry re-attaches. */
export async function runChildAgent(
  env: Env,
  parent: AgentRunInit,
  agentId: string,
  input: string,
  callId: string,
  signal: AbortSignal,
): Promise<string> {
  if (parent.depth + 1 > MAX_AGENT_DEPTH)
    throw new NodeFailure(`agents may call other agents at most ${MAX_AGENT_DEPTH} deep`);
  let row: AgentRow;
  try {
    row = (await runnableAgent(env, parent.toolAuth, agentId)).row;
  } catch (error) {
    if (error instanceof AppError && error.code === "not_found")
      throw new NodeFailure(`agent ${agentId} does not exist or the agent's owner cannot use it`);
    throw error;
  }
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${parent.runId}/${callId}`)),
  );
  const runId = toHex(digest).slice(0, 24);
  const definition = storedDefinition(row.definition);
  const first = Object.values(definition.inputs)[0]?.name ?? "input";
  const init = await prepare(
    env,
    row,
    parent.toolAuth.userId,
    { inputs: { [first]: input }, additionalInstructions: null },
    runId,
    parent.depth + 1,
  );
  await recordStart(env, parent.toolAuth, row, runId, parent.runId);
  const stub = runStub(env, runId);
  const onAbort = () => void stub.terminate();
  signal.addEventListener("abort", onAbort);
  try {
    await stub.start(init);
    const view = await stub.waitUntilSettled(definition.limits.wallSeconds * 1000);
    if (view?.status === "completed") return Object.values(view.outputs)[0] ?? "";
    throw new NodeFailure(
      `agent ${row.name} ${view?.status === "paused" ? "paused for approval or a question, which cannot be given inside another run" : `${view?.status ?? "failed"}: ${view?.error ?? "no answer"}`}`,
    );
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

export async function writeRunIndex(env: Env, run: AgentRunRecord): Promise<void> {
  const now = new Date().toISOString();
  const finished = run.status === "completed" || run.status === "failed" || run.status === "terminated";
  await database(env)
    .update(agentRuns)
    .set({ status: run.status, error: run.error, updatedAt: now, ...(finished ? { finishedAt: now } : {}) })
    .where(eq(agentRuns.id, run.init.runId));
}

async function indexedRun(env: Env, auth: AuthContext, agentId: string, runId: string) {
  const { row, canEdit } = await runnableAgent(env, auth, agentId);
  const run = (
    await database(env)
      .select()
      .from(agentRuns)
      .where(and(eq(agentRuns.id, runId), eq(agentRuns.agentId, row.id)))
      .limit(1)
  )[0];
  if (!run) throw notFound("run");
  return { row, canEdit, run };
}

export async function getAgentRun(env: Env, auth: AuthContext, agentId: string, runId: string): Promise<AgentRunView> {
  await indexedRun(env, auth, agentId, runId);
  const view = await runStub(env, runId).status();
  if (!view) throw notFound("run");
  return view;
}

export async function listAgentRuns(env: Env, auth: AuthContext, agentId: string) {
  const { row } = await runnableAgent(env, auth, agentId);
  const rows = await database(env)
    .select()
    .from(agentRuns)
    .where(eq(agentRuns.agentId, row.id))
    .orderBy(desc(agentRuns.createdAt))
    .limit(200);
  return rows.map((r) => ({
    run_id: r.id,
    status: r.status,
    error: r.error,
    started_by: r.startedBy,
    parent_run_id: r.parentRunId,
    created_at: r.createdAt,
    finished_at: r.finishedAt,
  }));
}

/** Approve, refuse or answer: approvals and refusals are the owner's, an admin's or an editor's; answers also the starter's. */
export async function decideAgentRun(
  env: Env,
  auth: AuthContext,
  agentId: string,
  runId: string,
  decisions: Decision[],
): Promise<AgentRunView> {
  const { canEdit, run } = await indexedRun(env, auth, agentId, runId);
  const approves = decisions.some((d) => d.kind !== "answered");
  if (auth.role === "viewer" && approves) throw forbidden("viewers cannot approve tool calls");
  if (approves ? !canEdit : !canEdit && run.startedBy !== auth.userId)
    throw forbidden(
      `only the agent's owner, an admin or an editor${approves ? "" : ", or the user who started the run,"} can decide run ${runId}'s pending calls`,
    );
  const result = await runStub(env, runId).decide(decisions);
  if (!result.ok) throw result.status === "missing" ? notFound("run") : conflict(result.error);
  return result.run;
}

export async function terminateAgentRun(
  env: Env,
  auth: AuthContext,
  agentId: string,
  runId: string,
): Promise<AgentRunView> {
  const { canEdit, run } = await indexedRun(env, auth, agentId, runId);
  if (!canEdit && run.startedBy !== auth.userId)
    throw forbidden(
      `only the user who started run ${runId}, the agent's owner, an admin or an editor can terminate it`,
    );
  const result = await runStub(env, runId).terminate();
  if (!result.ok) throw result.status === "missing" ? notFound("run") : conflict(result.error);
  return result.run;
}

/** Ends every run of the agent still running or paused (the agent is being deleted). */
