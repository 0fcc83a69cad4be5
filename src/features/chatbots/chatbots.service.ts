import { and, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env, Role } from "../../env";
import { database, writeUnique } from "../../db/client";
import { chatbots, chatbotConversations } from "../../db/schema/chatbots";
import { connections, users } from "../../db/schema/identity";
import { knowledgeBases } from "../../db/schema/knowledge-bases";
import { pipelines } from "../../db/schema/pipelines";
import { AppError, badRequest, invalidInput } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { assertCanCreate, assertVisible, resolveFetchTarget, type FetchQueryInput, ownedRecordFields } from "../../lib/ownership";
import { hasRole } from "../../middleware/auth";
import { auditInsert } from "../audit/audit.service";
import type { ChatbotCreateInput } from "./chatbots.schemas";

export type ChatbotRow = typeof chatbots.$inferSelect;

export interface DeploymentSettings {
  display_name?: string;
  greeting?: string;
  primary_color?: string;
  secondary_color?: string;
  avatar_url?: string;
  suggested_questions?: string[];
  show_sources?: boolean;
}

export interface AccessSettings {
  mode?: "public" | "password" | "members";
  password_hash?: string;
  allowed_origins?: string[];
  rate_limit_per_minute?: number;
}

export interface RbacSettings {
  editors?: string[];
  editor_roles?: Role[];
  runners?: string[];
  runner_roles?: Role[];
}

export interface TelephonySettings {
  account_sid?: string;
  phone_number?: string;
  enabled?: boolean;
  auth_token_last_four?: string;
}

export interface ChatWorkspaceSettings {
  team_id?: string;
  api_base_url?: string;
  enabled?: boolean;
  bot_token_last_four?: string;
}

export function parseObject<T>(text: string): T {
  try {
    const parsed: unknown = JSON.parse(text);
    return (parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {}) as T;
  } catch {
    return {} as T;
  }
}

export function knowledgeBaseIdsOf(row: ChatbotRow): string[] {
  try {
    const parsed: unknown = JSON.parse(row.knowledgeBaseIds);
    return Array.isArray(parsed) ? parsed.filter((v): v is string => typeof v === "string") : [];
  } catch {
    return [];
  }
}

/** A chatbot as its organization sees it. Secrets are write-only: only whether they are set and their last four. */
export function chatbotRecord(row: ChatbotRow) {
  const access = parseObject<AccessSettings>(row.access);
  const telephony = parseObject<TelephonySettings>(row.telephony);
  const workspace = parseObject<ChatWorkspaceSettings>(row.chatworkspace);
  return {
    ...ownedRecordFields(row),
    pipeline: row.pipelineId ? { id: row.pipelineId, input: row.pipelineInput, output: row.pipelineOutput } : null,
    knowledgeBaseIds: knowledgeBaseIdsOf(row),
    queryOptions: parseObject<Record<string, unknown>>(row.queryOptions),
    systemPrompt: row.systemPrompt,
    model: row.model,
    followUpQuestions: row.followUpQuestions,
    browserExtension: row.browserExtension,
    deployed: row.deployed,
    deployedAt: row.deployedAt,
    deployment: parseObject<DeploymentSettings>(row.deployment),
    access: {
      mode: access.mode ?? "public",
      hasPassword: Boolean(access.password_hash),
      allowedOrigins: access.allowed_origins ?? [],
      rateLimitPerMinute: access.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    },
    rbac: parseObject<RbacSettings>(row.rbac),
    telephony: {
      accountSid: telephony.account_sid ?? null,
      phoneNumber: telephony.phone_number ?? null,
      enabled: telephony.enabled ?? false,
      hasAuthToken: row.telephonyTokenSealed !== null,
      authTokenLastFour: telephony.auth_token_last_four ?? null,
    },
    chatworkspace: {
      teamId: workspace.team_id ?? null,
      apiBaseUrl: workspace.api_base_url ?? null,
      enabled: workspace.enabled ?? false,
      hasSigningSecret: row.chatworkspaceSigningSealed !== null,
      hasBotToken: row.chatworkspaceTokenSealed !== null,
      botTokenLastFour: workspace.bot_token_last_four ?? null,
    },
  };
}

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 20;

async function assertModelConnection(env: Env, auth: AuthContext, model: string): Promise<void> {
  const connectionName = model.slice(0, model.indexOf("/"));
  const found = await database(env).select({ id: connections.id }).from(connections).where(and(eq(connections.orgId, auth.orgId), eq(connections.name, connectionName))).limit(1);
  if (!found[0]) throw badRequest(`model: no connection named '${connectionName}' in this organization`);
}

async function assertKnowledgeBase(env: Env, auth: AuthContext, kbId: string): Promise<void> {
  const found = await database(env).select({ id: knowledgeBases.id }).from(knowledgeBases).where(and(eq(knowledgeBases.id, kbId), eq(knowledgeBases.orgId, auth.orgId))).limit(1);
  if (!found[0]) throw badRequest(`knowledge_base_ids: no knowledge base ${kbId} in this organization`);
}

async function assertPipeline(env: Env, auth: AuthContext, pipelineId: string): Promise<void> {
  const found = await database(env).select({ id: pipelines.id }).from(pipelines).where(and(eq(pipelines.id, pipelineId), eq(pipelines.orgId, auth.orgId))).limit(1);
  if (!found[0]) throw badRequest(`pipeline: no pipeline ${pipelineId} in this organization`);
}

export async function createChatbot(env: Env, auth: AuthContext, input: ChatbotCreateInput): Promise<ChatbotRow> {
  assertCanCreate(auth);
  const pipelineId = input.pipeline?.id ?? input.pipeline_id ?? null;
  const builtIn = input.knowledge_base_ids !== undefined || input.system_prompt !== undefined || input.model !== undefined;
  if (pipelineId && builtIn) throw invalidInput(["body", "pipeline"], "a chatbot answers through either a pipeline or knowledge bases and a model, not both");
  if (!pipelineId && !(input.knowledge_base_ids?.length || input.model || input.system_prompt)) {
    throw invalidInput(["body", "pipeline"], "give either pipeline.id, or knowledge_base_ids, a system_prompt and optionally a model", "missing");
  }
  if (input.model) await assertModelConnection(env, auth, input.model);
  for (const kbId of new Set(input.knowledge_base_ids ?? [])) await assertKnowledgeBase(env, auth, kbId);
  if (pipelineId) await assertPipeline(env, auth, pipelineId);
  const now = new Date().toISOString();
  const row: ChatbotRow = {
    id: newId(),
    orgId: auth.orgId,
    ownerId: auth.userId,
    name: input.name,
    description: input.description,
    pipelineId,
    pipelineInput: input.pipeline?.input ?? null,
    pipelineOutput: input.pipeline?.output ?? null,
    knowledgeBaseIds: JSON.stringify([...new Set(input.knowledge_base_ids ?? [])]),
    queryOptions: JSON.stringify(input.query_options ?? {}),
    systemPrompt: input.system_prompt ?? "",
    model: input.model ?? null,
    followUpQuestions: input.follow_up_questions,
    browserExtension: input.browser_extension,
    deployed: false,
    deployedAt: null,
    deployment: "{}",
    access: "{}",
    rbac: "{}",
    telephony: "{}",
    telephonyTokenSealed: null,
    chatworkspace: "{}",
    chatworkspaceSigningSealed: null,
    chatworkspaceTokenSealed: null,
    createdAt: now,
    updatedAt: now,
  };
  const db = database(env);
  await writeUnique(() => db.batch([db.insert(chatbots).values(row), auditInsert(env, auth, { action: "chatbot.create", targetType: "chatbot", targetId: row.id, details: { name: row.name } })]), `you already have a chatbot named '${input.name}'`);
  return row;
}

/** A chatbot of the caller's organization, else 404 (another organization's chatbot is not found either). */
export async function getVisibleChatbot(env: Env, auth: AuthContext, id: string): Promise<ChatbotRow> {
  const rows = await database(env).select().from(chatbots).where(eq(chatbots.id, id)).limit(1);
  return assertVisible(rows[0], auth, "chatbot");
}

export async function fetchChatbot(env: Env, auth: AuthContext, query: FetchQueryInput): Promise<ChatbotRow> {
  const target = await resolveFetchTarget(env, auth, query);
  if ("id" in target) return getVisibleChatbot(env, auth, target.id);
  const rows = await database(env)
    .select()
    .from(chatbots)
    .where(and(eq(chatbots.orgId, auth.orgId), eq(chatbots.ownerId, target.ownerId), eq(chatbots.name, target.name)))
    .limit(1);
  return assertVisible(rows[0], auth, "chatbot");
}

export async function listChatbots(env: Env, auth: AuthContext, includeShared: boolean, onlyBrowserExtension = false): Promise<ChatbotRow[]> {
  const scope = includeShared ? eq(chatbots.orgId, auth.orgId) : and(eq(chatbots.orgId, auth.orgId), eq(chatbots.ownerId, auth.userId));
  const where = onlyBrowserExtension ? and(scope, eq(chatbots.browserExtension, true)) : scope;
  return database(env).select().from(chatbots).where(where).orderBy(chatbots.createdAt, chatbots.id);
}

/** Its owner, an admin, or a user or role the chatbot's RBAC names as editor may change it. */
export function assertCanEdit(row: ChatbotRow, auth: AuthContext): void {
  assertCanCreate(auth);
  if (row.ownerId === auth.userId || hasRole(auth, "admin")) return;
  const rbac = parseObject<RbacSettings>(row.rbac);
  if (rbac.editors?.includes(auth.userId) || rbac.editor_roles?.includes(auth.role)) return;
  throw new AppError("forbidden", "only the chatbot's owner, an admin or an editor named in its access rules can change it");
}

/** With runners or runner roles set, only they (and editors) may run the chatbot; otherwise every member may. */
export function canRun(row: ChatbotRow, auth: { userId: string; role: Role }): boolean {
  if (row.ownerId === auth.userId || auth.role === "admin" || auth.role === "owner") return true;
  const rbac = parseObject<RbacSettings>(row.rbac);
  const restricted = (rbac.runners?.length ?? 0) > 0 || (rbac.runner_roles?.length ?? 0) > 0;
  if (!restricted) return true;
  return Boolean(rbac.runners?.includes(auth.userId) || rbac.runner_roles?.includes(auth.role) || rbac.editors?.includes(auth.userId) || rbac.editor_roles?.includes(auth.role));
}

export function assertCanRun(row: ChatbotRow, auth: AuthContext): void {
  if (!canRun(row, auth)) throw new AppError("forbidden", "this chatbot's access rules do not let you run it");
}

/** Conversation ids of a chatbot, so their Durable Objects can be emptied with it. */
export async function conversationIdsOf(env: Env, chatbotId: string): Promise<string[]> {
  const rows = await database(env).select({ id: chatbotConversations.id }).from(chatbotConversations).where(eq(chatbotConversations.chatbotId, chatbotId));
  return rows.map((r) => r.id);
}

export async function deleteChatbot(env: Env, auth: AuthContext, id: string): Promise<string[]> {
  const row = await getVisibleChatbot(env, auth, id);
  assertCanEdit(row, auth);
  const conversationIds = await conversationIdsOf(env, id);
  const db = database(env);
  await db.batch([
    db.delete(chatbotConversations).where(eq(chatbotConversations.chatbotId, id)),
    db.delete(chatbots).where(eq(chatbots.id, id)),
    auditInsert(env, auth, { action: "chatbot.delete", targetType: "chatbot", targetId: id, details: { name: row.name } }),
  ]);
  return conversationIds;
}

/** Every id must be a user of the caller's organization. */
export async function assertOrgUsers(env: Env, auth: AuthContext, ids: string[], field: string): Promise<void> {
  if (ids.length === 0) return;
  const found = await database(env).select({ id: users.id }).from(users).where(and(eq(users.orgId, auth.orgId), inArray(users.id, ids)));
  const known = new Set(found.map((r) => r.id));
  const missing = ids.find((id) => !known.has(id));
  if (missing) throw badRequest(`${field}: user ${missing} is not in this organization`);
}

export async function saveChatbot(env: Env, auth: AuthContext, row: ChatbotRow, changes: Partial<ChatbotRow>, action: string, fields: string[]): Promise<ChatbotRow> {
  const next = { ...row, ...changes, updatedAt: new Date().toISOString() };
  const db = database(env);
  await db.batch([
    db.update(chatbots).set({ ...changes, updatedAt: next.updatedAt }).where(eq(chatbots.id, row.id)),
    auditInsert(env, auth, { action, targetType: "chatbot", targetId: row.id, details: { fields } }),
  ]);
  return next;
}
