import { sqliteTable, text, integer, index, uniqueIndex } from "drizzle-orm/sqlite-core";
import type {
  AccessSettings,
  ChatbotQueryOptions,
  ChatWorkspaceSettings,
  DeploymentSettings,
  RbacSettings,
  TelephonySettings,
} from "../../features/chatbots/chatbot-record";

export const chatbots = sqliteTable(
  "chatbots",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    pipelineId: text("pipeline_id"),
    pipelineInput: text("pipeline_input"),
    pipelineOutput: text("pipeline_output"),
    /** JSON array of knowledge base ids. */
    knowledgeBaseIds: text("knowledge_base_ids", { mode: "json" }).$type<string[]>().notNull().default([]),
    /** JSON object of knowledge base query options (top_k, score_cutoff ...). */
    queryOptions: text("query_options", { mode: "json" }).$type<ChatbotQueryOptions>().notNull().default({}),
    systemPrompt: text("system_prompt").notNull().default(""),
    model: text("model"),
    followUpQuestions: integer("follow_up_questions").notNull().default(0),
    browserExtension: integer("browser_extension", { mode: "boolean" }).notNull().default(false),
    deployed: integer("deployed", { mode: "boolean" }).notNull().default(false),
    deployedAt: text("deployed_at"),
    deployment: text("deployment", { mode: "json" }).$type<DeploymentSettings>().notNull().default({}),
    access: text("access", { mode: "json" }).$type<AccessSettings>().notNull().default({}),
    rbac: text("rbac", { mode: "json" }).$type<RbacSettings>().notNull().default({}),
    telephony: text("telephony", { mode: "json" }).$type<TelephonySettings>().notNull().default({}),
    telephonyTokenSealed: text("telephony_token_sealed"),
    chatworkspace: text("chatworkspace", { mode: "json" }).$type<ChatWorkspaceSettings>().notNull().default({}),
    chatworkspaceSigningSealed: text("chatworkspace_signing_sealed"),
    chatworkspaceTokenSealed: text("chatworkspace_token_sealed"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("chatbots_owner_name").on(t.orgId, t.ownerId, t.name), index("chatbots_org").on(t.orgId)],
);

export const chatbotConversations = sqliteTable(
  "chatbot_conversations",
  {
    id: text("id").primaryKey(),
    chatbotId: text("chatbot_id").notNull(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id"),
    visitorId: text("visitor_id"),
    channel: text("channel", { enum: ["api", "visitor", "telephony", "chatworkspace"] })
      .notNull()
      .default("api"),
    channelKey: text("channel_key"),
    name: text("name").notNull(),
    messageCount: integer("message_count").notNull().default(0),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("chatbot_conversations_owner").on(t.orgId, t.ownerId, t.updatedAt),
    index("chatbot_conversations_visitor").on(t.chatbotId, t.visitorId, t.updatedAt),
    uniqueIndex("chatbot_conversations_channel").on(t.chatbotId, t.channelKey),
  ],
);

export const chatbotRateLimits = sqliteTable("chatbot_rate_limits", {
  key: text("key").primaryKey(),
  windowStart: integer("window_start").notNull(),
  count: integer("count").notNull(),
});

export const chatbotWebhookReplays = sqliteTable("chatbot_webhook_replays", {
  key: text("key").primaryKey(),
  createdAt: integer("created_at").notNull(),
});
