import { and, eq, sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { agents } from "../../db/schema/agents";
import { AppError, badRequest, forbidden, notFound } from "../../lib/errors";
import type { FetchQueryInput } from "../../lib/ownership";
import type { NodeServices } from "../pipelines/pipeline-services";
import {
  definitionForSdk,
  storedDefinition,
  readDefinition,
  type AgentDefinition,
  type AgentWriteInput,
} from "./agent-definition";
import { runnableAgent } from "./agent-runs.service";
import type { AgentRow } from "./agents.records";
import { agentAccess, deleteAgent, historyInsert, insertAgent } from "./agents.service";

/**
 * The SDK's `/v1/agent` routes on the same records as the Group B `/agents/...` routes: one
 * agent, two route groups. The runnable part lives in `agents.definition`.
 */

/** Every tool must name a record the writer may use; otherwise the agent is refused (400). */
async function checkTools(
  env: Env,
  auth: AuthContext,
  services: NodeServices,
  definition: AgentDefinition,
  selfId?: string,
): Promise<void> {
  for (const tool of definition.tools) {
    const id = tool.target ?? "";
    let problem: string | null = null;
    if (tool.kind === "knowledge_base") problem = await services.checkKnowledgeBase(auth, id);
    else if (tool.kind === "transformation") problem = await services.checkTransformation(auth, id);
    else if (tool.kind === "pipeline" || tool.kind === "agent") {
      if (tool.kind === "agent" && id === selfId) problem = "an agent cannot call itself";
      else {
        try {
          if (tool.kind === "pipeline")
            await (await import("../pipelines/pipelines.service")).loadPipeline(env, auth, id);
          else await runnableAgent(env, auth, id);
        } catch (error) {
          if (!(error instanceof AppError && error.code === "not_found")) throw error;
          problem = `${tool.kind} ${id} does not exist or you cannot use it`;
        }
      }
    }
    if (problem) throw badRequest(`tools.${tool.id}: ${problem}`);
  }
}

/** `services` checks that each tool's record exists and may be used (the app's `Deps.nodeServices`). */
export async function createAgentV1(env: Env, auth: AuthContext, services: NodeServices, body: AgentWriteInput) {
  const definition = readDefinition(body);
  await checkTools(env, auth, services, definition);
  const row = await insertAgent(env, auth, { name: body.name, description: body.description, definition }, "created");
  return { status: "success" as const, id: row.id, branch_id: row.id, version: row.version };
}

/** `?id=` any agent the caller may run; `?name=` the caller's own agent of that name. */
async function resolveAgent(env: Env, auth: AuthContext, query: FetchQueryInput): Promise<AgentRow> {
  if (query.id) return (await runnableAgent(env, auth, query.id)).row;
  if (!query.name) throw badRequest("give id or name");
  const row = (
    await database(env)
      .select()
      .from(agents)
      .where(and(eq(agents.orgId, auth.orgId), eq(agents.ownerId, auth.userId), eq(agents.name, query.name)))
      .limit(1)
  )[0];
  if (!row) throw notFound("agent");
  return row;
}

export async function fetchAgentV1(env: Env, auth: AuthContext, query: FetchQueryInput) {
  const row = await resolveAgent(env, auth, query);
  const definition = storedDefinition(row.definition);
  return {
    status: "success" as const,
    object: {
      _id: row.id,
      name: row.name,
      description: row.description,
      mainBranch: row.id,
      branch_id: row.id,
      version: row.version,
      ownerId: row.ownerId,
      orgId: row.orgId,
      sourceAgentId: row.sourceAgentId,
      ...definitionForSdk(definition),
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    },
  };
}

/** Owner, admin, or a user it is shared with as editor. */
export async function updateAgentV1(
  env: Env,
  auth: AuthContext,
  services: NodeServices,
  id: string,
  body: AgentWriteInput,
) {
  const access = await agentAccess(env, auth, id);
  if (access.row.orgId !== auth.orgId) throw notFound("agent");
  if (!access.canEdit)
    throw forbidden("only the agent's owner, an admin or a user it is shared with as editor can change it");
  const definition = readDefinition(body, storedDefinition(access.row.definition));
  await checkTools(env, auth, services, definition, id);
  const db = database(env);
  const changes = {
    name: body.name,
    description: body.description,
    definition,
    version: sql`${agents.version} + 1`,
    updatedAt: new Date().toISOString(),
  };
  await writeUnique(
    () =>
      db.batch([
        db.update(agents).set(changes).where(eq(agents.id, id)),
        historyInsert(env, auth, access.row, "updated"),
      ]),
    `the owner already has an agent named '${body.name}'`,
  );
  return { status: "success" as const, id, branch_id: id, version: access.row.version + 1 };
}

export async function deleteAgentV1(env: Env, auth: AuthContext, id: string) {
  const access = await agentAccess(env, auth, id);
  if (access.row.orgId !== auth.orgId) throw notFound("agent");
  await deleteAgent(env, auth, id);
  return { status: "success" as const };
}
