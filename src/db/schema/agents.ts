import { sqliteTable, text, integer, primaryKey } from "drizzle-orm/sqlite-core";

export const agents = sqliteTable("agents", {
  id: text("id").primaryKey(),
  orgId: text("org_id").notNull(),
  ownerId: text("owner_id").notNull(),
  name: text("name").notNull(),
  description: text("description").notNull().default(""),
  pipelineId: text("pipeline_id"),
  /** JSON object: instructions, model, tools and other settings of the agent. */
  config: text("config").notNull().default("{}"),
  /** JSON array of strings. */
  tags: text("tags").notNull().default("[]"),
  /** The agent this one was duplicated or imported from. */
  sourceAgentId: text("source_agent_id"),
  published: integer("published", { mode: "boolean" }).notNull().default(false),
  publishedAt: text("published_at"),
  category: text("category"),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

export const agentShares = sqliteTable(
  "agent_shares",
  {
    agentId: text("agent_id").notNull(),
    userId: text("user_id").notNull(),
    sharedBy: text("shared_by").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.agentId, t.userId] })],
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

export const agentHistory = sqliteTable("agent_history", {
  id: text("id").primaryKey(),
  userId: text("user_id").notNull(),
  agentId: text("agent_id").notNull(),
  agentName: text("agent_name").notNull(),
  action: text("action").notNull(),
  createdAt: text("created_at").notNull(),
});
