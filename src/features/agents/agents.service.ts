import { and, desc, eq, inArray, or } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { agentFavorites, agentHistory, agents, agentShares } from "../../db/schema/agents";
import { users } from "../../db/schema/identity";
import { AppError, invalidInput, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hasRole } from "../../middleware/auth";
import type { AgentDefinition } from "./agent-definition";
import { terminateActiveAgentRuns } from "./agent-run-stub";
import { agentDescription, type AgentRow } from "./agents.records";

/**
 * Who may see an agent: its owner, admins of its organization, users it is shared with, and,
 * once it is published, every signed-in user (read-only). Anyone else gets a 404.
 */
export interface AgentAccess {
  row: AgentRow;
  canWrite: boolean;
  sharedWithMe: boolean;
  /** Owner, admin, or a user it is shared with as editor: may change its definition (/v1 update). */
  canEdit: boolean;
  /** Same organization and allowed to see it: may run it. Other organizations run only their imported copy. */
  canRun: boolean;
}

export async function agentAccess(env: Env, auth: AuthContext, agentId: string): Promise<AgentAccess> {
  const db = database(env);
  const row = (await db.select().from(agents).where(eq(agents.id, agentId)).limit(1))[0];
  if (!row) throw notFound("agent");
  const sameOrg = row.orgId === auth.orgId;
  const owner = sameOrg && row.ownerId === auth.userId;
  const admin = sameOrg && hasRole(auth, "admin");
  const share =
    sameOrg && !owner
      ? (
          await db
            .select()
            .from(agentShares)
            .where(and(eq(agentShares.agentId, row.id), eq(agentShares.userId, auth.userId)))
            .limit(1)
        )[0]
      : undefined;
  const shared = share !== undefined;
  if (!owner && !admin && !shared && !row.published) throw notFound("agent");
  const canWrite = (owner || admin) && auth.role !== "viewer";
  return {
    row,
    canWrite,
    sharedWithMe: shared,
    canEdit: canWrite || (share?.role === "editor" && auth.role !== "viewer"),
    canRun: owner || admin || shared,
  };
}

export async function writableAgent(env: Env, auth: AuthContext, agentId: string): Promise<AgentRow> {
  const access = await agentAccess(env, auth, agentId);
  if (!access.canWrite) {
    if (access.row.orgId !== auth.orgId) throw notFound("agent");
    throw new AppError("forbidden", "only the agent's owner or an admin can change it");
  }
  return access.row;
}

export function historyInsert(env: Env, auth: AuthContext, agent: Pick<AgentRow, "id" | "name">, action: string) {
  return database(env).insert(agentHistory).values({
    id: newId(),
    userId: auth.userId,
    agentId: agent.id,
    agentName: agent.name,
    action,
    createdAt: new Date().toISOString(),
  });
}

export interface NewAgent {
  name: string;
  description: string;
  pipelineId?: string | null;
  config?: Record<string, unknown>;
  tags?: string[];
  sourceAgentId?: string | null;
  definition?: AgentDefinition | null;
}

/** Creates an agent owned by the caller and records `action` in their history. */
export async function insertAgent(env: Env, auth: AuthContext, input: NewAgent, action: string): Promise<AgentRow> {
  if (auth.role === "viewer") throw new AppError("forbidden", "viewers cannot create agents");
  const now = new Date().toISOString();
  const row: AgentRow = {
    id: newId(),
    orgId: auth.orgId,
    ownerId: auth.userId,
    name: input.name,
    description: input.description,
    pipelineId: input.pipelineId ?? null,
    config: input.config ?? {},
    tags: input.tags ?? [],
    sourceAgentId: input.sourceAgentId ?? null,
    published: false,
    publishedAt: null,
    category: null,
    definition: input.definition ?? null,
    version: 1,
    publishedDefinition: null,
    createdAt: now,
    updatedAt: now,
  };
  const db = database(env);
  await writeUnique(
    () => db.batch([db.insert(agents).values(row), historyInsert(env, auth, row, action)]),
    `you already have an agent named '${input.name}'`,
  );
  return row;
}

async function favoriteIds(env: Env, auth: AuthContext): Promise<Set<string>> {
  const rows = await database(env)
    .select({ agentId: agentFavorites.agentId })
    .from(agentFavorites)
    .where(eq(agentFavorites.userId, auth.userId));
  return new Set(rows.map((r) => r.agentId));
}

export async function listMyAgents(env: Env, auth: AuthContext) {
  const rows = await database(env)
    .select()
    .from(agents)
    .where(and(eq(agents.ownerId, auth.userId), eq(agents.orgId, auth.orgId)))
    .orderBy(desc(agents.createdAt));
  const favorites = await favoriteIds(env, auth);
  return rows.map((row) => agentDescription(row, { favorite: favorites.has(row.id) }));
}

export async function listSharedWithMe(env: Env, auth: AuthContext) {
  const db = database(env);
  const shares = await db
    .select({ agentId: agentShares.agentId })
    .from(agentShares)
    .where(eq(agentShares.userId, auth.userId));
  if (!shares.length) return [];
  const rows = await db
    .select()
    .from(agents)
    .where(
      and(
        inArray(
          agents.id,
          shares.map((s) => s.agentId),
        ),
        eq(agents.orgId, auth.orgId),
      ),
    )
    .orderBy(desc(agents.createdAt));
  const favorites = await favoriteIds(env, auth);
  return rows.map((row) => agentDescription(row, { favorite: favorites.has(row.id), sharedWithMe: true }));
}

export async function deleteAgent(env: Env, auth: AuthContext, agentId: string): Promise<void> {
  const row = await writableAgent(env, auth, agentId);
  // A deleted agent's runs in progress stop too: their tools would go on acting as its owner.
  await terminateActiveAgentRuns(env, row.id);
  const db = database(env);
  await db.batch([
    db.delete(agentShares).where(eq(agentShares.agentId, row.id)),
    db.delete(agentFavorites).where(eq(agentFavorites.agentId, row.id)),
    db.delete(agents).where(eq(agents.id, row.id)),
    historyInsert(env, auth, row, "deleted"),
  ]);
}

/** Copies an agent the caller can see into their own agents. */
export async function copyAgent(
  env: Env,
  auth: AuthContext,
  source: AgentRow,
  overrides: { name?: string; description?: string },
  action: string,
) {
  const copy = await insertAgent(
    env,
    auth,
    {
      name: overrides.name ?? source.name,
      description: overrides.description ?? source.description,
      // A pipeline belongs to its organization; a copy into another one cannot run it.
      pipelineId: source.orgId === auth.orgId ? source.pipelineId : null,
      config: source.config,
      tags: source.tags,
      sourceAgentId: source.id,
      // The copy is pinned to the definition it was made from; its tools resolve in the copier's
      // organization, with the copier's rights, so they never reach the source's records.
      definition: source.definition,
    },
    action,
  );
  return agentDescription(copy);
}

export async function shareAgent(
  env: Env,
  auth: AuthContext,
  agentId: string,
  userIds: string[],
  emails: string[],
  role: "viewer" | "editor" = "viewer",
) {
  const row = await writableAgent(env, auth, agentId);
  if (!userIds.length && !emails.length)
    throw invalidInput(["body", "user_ids"], "name at least one user (user_ids or emails) to share with", "missing");
  const db = database(env);
  const conditions = [
    userIds.length ? inArray(users.id, userIds) : undefined,
    emails.length
      ? inArray(
          users.email,
          emails.map((e) => e.toLowerCase()),
        )
      : undefined,
  ].filter((c) => c !== undefined);
  const targets = await db
    .select({ id: users.id, email: users.email })
    .from(users)
    .where(and(eq(users.orgId, auth.orgId), or(...conditions)));
  const found = new Set(targets.flatMap((t) => [t.id, t.email]));
  const unknown = [...userIds, ...emails.map((e) => e.toLowerCase())].filter((u) => !found.has(u));
  // Users of other organizations are reported as unknown, so nobody learns they exist.
  if (unknown.length) throw notFound(`user ${unknown[0]}`);
  const now = new Date().toISOString();
  const recipients = targets.filter((t) => t.id !== row.ownerId);
  if (recipients.length) {
    const shares = recipients.map((t) =>
      db
        .insert(agentShares)
        .values({ agentId: row.id, userId: t.id, sharedBy: auth.userId, role, createdAt: now })
        .onConflictDoUpdate({ target: [agentShares.agentId, agentShares.userId], set: { role } }),
    );
    await db.batch([historyInsert(env, auth, row, "shared"), ...shares]);
  }
  return { shared_with: recipients.map((t) => t.id) };
}

export async function removeShare(env: Env, auth: AuthContext, agentId: string, userId?: string): Promise<void> {
  const db = database(env);
  if (!userId || userId === auth.userId) {
    const deleted = await db
      .delete(agentShares)
      .where(and(eq(agentShares.agentId, agentId), eq(agentShares.userId, auth.userId)))
      .returning();
    if (!deleted.length) throw notFound("shared agent");
    return;
  }
  const row = await writableAgent(env, auth, agentId);
  const deleted = await db
    .delete(agentShares)
    .where(and(eq(agentShares.agentId, row.id), eq(agentShares.userId, userId)))
    .returning();
  if (!deleted.length) throw notFound("share");
}
