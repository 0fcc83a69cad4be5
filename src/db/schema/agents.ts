import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { AgentDefinition } from "../../features/agents/agent-definition";

export const agents = sqliteTable(
  "agents",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    pipelineId: text("pipeline_id"),
    /** JSON object: instructions, model, tools and other settings of the agent. */
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull().default({}),
    /** JSON array of strings. */
    tags: text("tags", { mode: "json" }).$type<string[]>().notNull().default([]),
    /** The agent this one was duplicated or imported from. */
    sourceAgentId: text("source_agent_id"),
    published: integer("published", { mode: "boolean" }).notNull().default(false),
    publishedAt: text("published_at"),
    category: text("category"),
    /** JSON AgentDefinition (agent-definition.ts): what runs; null for a record that was never given one. */
    definition: text("definition", { mode: "json" }).$type<AgentDefinition>(),
    /** Bumped on every /v1 update; an import copies the definition of the version it saw. */
    version: integer("version").notNull().default(1),
    /** The definition when it was last published: what an import copies (pinned), whatever the owner edits later. */
    publishedDefinition: text("published_definition", { mode: "json" }).$type<AgentDefinition>(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("agents_owner_name").on(t.ownerId, t.name),
    index("agents_org").on(t.orgId),
    index("agents_published").on(t.published, t.publishedAt),
  ],
);

export const agentShares = sqliteTable(
  "agent_shares",
  {
    agentId: text("agent_id").notNull(),
    userId: text("user_id").notNull(),
    sharedBy: text("shared_by").notNull(),
    /** "viewer" may run the agent; "editor" may also change it. */
    role: text("role").notNull().default("viewer"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.agentId, t.userId] }), index("agent_shares_user").on(t.userId)],
);

export const agentFavorites = sqliteTable(
  "agent_favorites",
  {
    userId: text("user_id").notNull(),
    agentId: text("agent_id").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.agentId] })],
);

export const agentHistory = sqliteTable(
  "agent_history",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    agentId: text("agent_id").notNull(),
    agentName: text("agent_name").notNull(),
    action: text("action").notNull(),
    /** For action "run": the run. */
    runId: text("run_id"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("agent_history_user").on(t.userId, t.createdAt)],
);

/** The index of agent runs; each run's state of record is its AgentRunObject. */
export const agentRuns = sqliteTable(
  "agent_runs",
  {
    id: text("id").primaryKey(),
    agentId: text("agent_id").notNull(),
    orgId: text("org_id").notNull(),
    startedBy: text("started_by").notNull(),
    parentRunId: text("parent_run_id"),
    status: text("status").notNull(),
    error: text("error"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    finishedAt: text("finished_at"),
  },
  (t) => [index("agent_runs_agent").on(t.agentId, t.createdAt), index("agent_runs_org").on(t.orgId, t.status)],
);
