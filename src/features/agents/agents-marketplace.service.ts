import { and, count, desc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { agentFavorites, agentHistory, agents } from "../../db/schema/agents";
import { users } from "../../db/schema/identity";
import { badRequest, notFound } from "../../lib/errors";
import { agentDescription, marketplaceDescription, type AgentRow } from "./agents.records";
import { agentAccess, copyAgent, deleteAgent, historyInsert, writableAgent } from "./agents.service";

async function describeForMarketplace(env: Env, rows: AgentRow[]) {
  if (!rows.length) return [];
  const db = database(env);
  const ids = rows.map((r) => r.id);
  const authors = await db
    .select({ id: users.id, username: users.username, name: users.name })
    .from(users)
    .where(inArray(users.id, [...new Set(rows.map((r) => r.ownerId))]));
  const favoriteCounts = await db
    .select({ agentId: agentFavorites.agentId, n: count() })
    .from(agentFavorites)
    .where(inArray(agentFavorites.agentId, ids))
    .groupBy(agentFavorites.agentId);
  const importCounts = await db
    .select({ agentId: agents.sourceAgentId, n: count() })
    .from(agents)
    .where(and(inArray(agents.sourceAgentId, ids), isNotNull(agents.sourceAgentId)))
    .groupBy(agents.sourceAgentId);
  const authorOf = new Map(authors.map((a) => [a.id, a.name || a.username]));
  const favorites = new Map(favoriteCounts.map((f) => [f.agentId, f.n]));
  const imports = new Map(importCounts.map((i) => [i.agentId, i.n]));
  return rows.map((row) =>
    marketplaceDescription(row, authorOf.get(row.ownerId) ?? null, {
      favorites: favorites.get(row.id) ?? 0,
      imports: imports.get(row.id) ?? 0,
    }),
  );
}

export async function publishAgent(
  env: Env,
  auth: AuthContext,
  input: { agent_id: string; category?: string; tags?: string[] },
) {
  const row = await writableAgent(env, auth, input.agent_id);
  const now = new Date().toISOString();
  const changes = {
    published: true,
    publishedDefinition: row.definition,
    publishedAt: row.publishedAt ?? now,
    category: input.category ?? row.category,
    tags: input.tags ?? row.tags,
    updatedAt: now,
  };
  const db = database(env);
  await db.batch([
    db.update(agents).set(changes).where(eq(agents.id, row.id)),
    historyInsert(env, auth, row, "published"),
  ]);
  return agentDescription({ ...row, ...changes });
}

export async function unpublishAgent(env: Env, auth: AuthContext, agentId: string, pipelineId: string): Promise<void> {
  const row = await writableAgent(env, auth, agentId);
  if (pipelineId !== row.pipelineId && pipelineId !== row.id) throw notFound("agent with that pipeline");
  if (!row.published) throw badRequest("agent_id: the agent is not published");
  const db = database(env);
  await db.batch([
    db
      .update(agents)
      .set({ published: false, publishedAt: null, updatedAt: new Date().toISOString() })
      .where(eq(agents.id, row.id)),
    historyInsert(env, auth, row, "unpublished"),
  ]);
}

export async function listPublished(env: Env) {
  const rows = await database(env)
    .select()
    .from(agents)
    .where(eq(agents.published, true))
    .orderBy(desc(agents.publishedAt))
    .limit(500);
  return describeForMarketplace(env, rows);
}

/** The public view of one published agent; an unpublished or unknown agent is a 404. */
export async function publicAgent(env: Env, agentId: string) {
  const rows = await database(env)
    .select()
    .from(agents)
    .where(and(eq(agents.id, agentId), eq(agents.published, true)))
    .limit(1);
  if (!rows[0]) throw notFound("agent");
  return (await describeForMarketplace(env, rows))[0];
}

export async function addFavorite(env: Env, auth: AuthContext, agentId: string): Promise<void> {
  const { row } = await agentAccess(env, auth, agentId);
  await database(env)
    .insert(agentFavorites)
    .values({ userId: auth.userId, agentId: row.id, createdAt: new Date().toISOString() })
    .onConflictDoNothing();
}

export async function removeFavorite(env: Env, auth: AuthContext, agentId: string): Promise<void> {
  const deleted = await database(env)
    .delete(agentFavorites)
    .where(and(eq(agentFavorites.userId, auth.userId), eq(agentFavorites.agentId, agentId)))
    .returning();
  if (!deleted.length) throw notFound("favorite");
}

export async function listFavorites(env: Env, auth: AuthContext) {
  const db = database(env);
  const favorites = await db
    .select()
    .from(agentFavorites)
    .where(eq(agentFavorites.userId, auth.userId))
    .orderBy(desc(agentFavorites.createdAt));
  if (!favorites.length) return { favorites: [] };
  const rows = await db
    .select()
    .from(agents)
    .where(
      inArray(
        agents.id,
        favorites.map((f) => f.agentId),
      ),
    );
  // A favorite stays listed only while the caller may still see the agent.
  const visible = [];
  for (const row of rows) {
    const readable =
      row.published || row.orgId === auth.orgId
        ? await agentAccess(env, auth, row.id).then(
            () => true,
            () => false,
          )
        : false;
    if (readable) visible.push(row);
  }
  return { favorites: visible.map((row) => agentDescription(row, { favorite: true })) };
}

export async function importAgent(
  env: Env,
  auth: AuthContext,
  agentId: string,
  overrides: { name?: string; description?: string },
) {
  const rows = await database(env)
    .select()
    .from(agents)
    .where(and(eq(agents.id, agentId), eq(agents.published, true)))
    .limit(1);
  if (!rows[0]) throw notFound("published agent");
  // The copy is pinned to the definition as published, not to the owner's later edits.
  return copyAgent(
    env,
    auth,
    { ...rows[0], definition: rows[0].publishedDefinition ?? rows[0].definition },
    overrides,
    "imported",
  );
}

/** Agents the caller imported from the marketplace: their own copies whose source is published elsewhere. */
export async function listImported(env: Env, auth: AuthContext) {
  const db = database(env);
  const copies = await db
    .select()
    .from(agents)
    .where(and(eq(agents.ownerId, auth.userId), isNotNull(agents.sourceAgentId)))
    .orderBy(desc(agents.createdAt));
  const imported = await db
    .select({ agentId: agentHistory.agentId })
    .from(agentHistory)
    .where(and(eq(agentHistory.userId, auth.userId), eq(agentHistory.action, "imported")));
  const importedIds = new Set(imported.map((h) => h.agentId));
  return copies.filter((c) => importedIds.has(c.id)).map((c) => agentDescription(c));
}

export async function removeImported(env: Env, auth: AuthContext, agentId: string): Promise<void> {
  const imported = await listImported(env, auth);
  const target = imported.find((a) => a._id === agentId || a.sourceAgentId === agentId);
  if (!target) throw notFound("imported agent");
  await deleteAgent(env, auth, target._id);
}

export async function listHistory(env: Env, auth: AuthContext) {
  const rows = await database(env)
    .select()
    .from(agentHistory)
    .where(eq(agentHistory.userId, auth.userId))
    .orderBy(desc(agentHistory.createdAt), desc(sql`rowid`))
    .limit(200);
  return rows.map((r) => ({
    _id: r.id,
    agentId: r.agentId,
    agentName: r.agentName,
    action: r.action,
    runId: r.runId ?? null,
    createdAt: r.createdAt,
  }));
}
