import { and, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env, Role } from "../../env";
import { database } from "../../db/client";
import { chatbots, chatbotConversations } from "../../db/schema/chatbots";
import { users } from "../../db/schema/identity";
import { AppError, badRequest } from "../../lib/errors";
import { assertCanCreate, assertVisible, resolveFetchTarget, type FetchQueryInput } from "../../lib/ownership";
import { hasRole } from "../../middleware/auth";
import { auditInsert } from "../audit/audit.service";

export { chatbotRecord, DEFAULT_RATE_LIMIT_PER_MINUTE } from "./chatbot-record";
export type {
  AccessSettings,
  ChatbotRow,
  ChatWorkspaceSettings,
  DeploymentSettings,
  RbacSettings,
  TelephonySettings,
} from "./chatbot-record";
import type { ChatbotRow } from "./chatbot-record";

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

export async function listChatbots(
  env: Env,
  auth: AuthContext,
  includeShared: boolean,
  onlyBrowserExtension = false,
): Promise<ChatbotRow[]> {
  const scope = includeShared
    ? eq(chatbots.orgId, auth.orgId)
    : and(eq(chatbots.orgId, auth.orgId), eq(chatbots.ownerId, auth.userId));
  const where = onlyBrowserExtension ? and(scope, eq(chatbots.browserExtension, true)) : scope;
  return database(env).select().from(chatbots).where(where).orderBy(chatbots.createdAt, chatbots.id);
}

/** Its owner, an admin, or a user or role the chatbot's RBAC names as editor may change it. */
export function assertCanEdit(row: ChatbotRow, auth: AuthContext): void {
  assertCanCreate(auth);
  if (row.ownerId === auth.userId || hasRole(auth, "admin")) return;
  const rbac = row.rbac;
  if (rbac.editors?.includes(auth.userId) || rbac.editor_roles?.includes(auth.role)) return;
  throw new AppError(
    "forbidden",
    "only the chatbot's owner, an admin or an editor named in its access rules can change it",
  );
}

/** With runners or runner roles set, only they (and editors) may run the chatbot; otherwise every member may. */
export function canRun(row: ChatbotRow, auth: { userId: string; role: Role }): boolean {
  if (row.ownerId === auth.userId || auth.role === "admin" || auth.role === "owner") return true;
  const rbac = row.rbac;
  const restricted = (rbac.runners?.length ?? 0) > 0 || (rbac.runner_roles?.length ?? 0) > 0;
  if (!restricted) return true;
  return Boolean(
    rbac.runners?.includes(auth.userId) ||
      rbac.runner_roles?.includes(auth.role) ||
      rbac.editors?.includes(auth.userId) ||
      rbac.editor_roles?.includes(auth.role),
  );
}

export function assertCanRun(row: ChatbotRow, auth: AuthContext): void {
  if (!canRun(row, auth)) throw new AppError("forbidden", "this chatbot's access rules do not let you run it");
}

/** Conversation ids of a chatbot, so their Durable Objects can be emptied with it. */
export async function conversationIdsOf(env: Env, chatbotId: string): Promise<string[]> {
  const rows = await database(env)
    .select({ id: chatbotConversations.id })
    .from(chatbotConversations)
    .where(eq(chatbotConversations.chatbotId, chatbotId));
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
    auditInsert(env, auth, {
      action: "chatbot.delete",
      targetType: "chatbot",
      targetId: id,
      details: { name: row.name },
    }),
  ]);
  return conversationIds;
}

/** Every id must be a user of the caller's organization. */
export async function assertOrgUsers(env: Env, auth: AuthContext, ids: string[], field: string): Promise<void> {
  if (ids.length === 0) return;
  const found = await database(env)
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.orgId, auth.orgId), inArray(users.id, ids)));
  const known = new Set(found.map((r) => r.id));
  const missing = ids.find((id) => !known.has(id));
  if (missing) throw badRequest(`${field}: user ${missing} is not in this organization`);
}

export async function saveChatbot(
  env: Env,
  auth: AuthContext,
  row: ChatbotRow,
  changes: Partial<ChatbotRow>,
  action: string,
  fields: string[],
): Promise<ChatbotRow> {
  const next = { ...row, ...changes, updatedAt: new Date().toISOString() };
  const db = database(env);
  await db.batch([
    db
      .update(chatbots)
      .set({ ...changes, updatedAt: next.updatedAt })
      .where(eq(chatbots.id, row.id)),
    auditInsert(env, auth, { action, targetType: "chatbot", targetId: row.id, details: { fields } }),
  ]);
  return next;
}
