import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { chatbotConversations } from "../../db/schema/chatbots";
import type { ConversationObject, StoredMessage } from "../../durable-objects/conversation-object";
import { rpcStub, type RpcSurface } from "../../durable-objects/rpc-stub";
import { badRequest, invalidInput, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import type { ChatbotRow } from "./chatbots.service";
import type { FeedbackInput } from "./chatbots.schemas";
import { deleteFiles } from "../../db/files";

export type ConversationRow = typeof chatbotConversations.$inferSelect;

/** Who a conversation belongs to: a signed-in user, a signed visitor session, or an integration's caller. */
export type ConversationActor =
  | { kind: "user"; userId: string }
  | { kind: "visitor"; visitorId: string }
  | { kind: "channel"; channel: "telephony" | "chatworkspace"; key: string };

export function conversationStub(env: Env, conversationId: string): RpcSurface<ConversationObject> {
  return rpcStub(env.CONVERSATIONS, conversationId);
}

function actorFilter(actor: ConversationActor) {
  if (actor.kind === "user")
    return and(eq(chatbotConversations.ownerId, actor.userId), isNull(chatbotConversations.visitorId));
  if (actor.kind === "visitor") return eq(chatbotConversations.visitorId, actor.visitorId);
  return eq(chatbotConversations.channelKey, `${actor.channel}:${actor.key}`);
}

export function conversationRecord(row: ConversationRow) {
  return {
    _id: row.id,
    chatbotId: row.chatbotId,
    name: row.name,
    channel: row.channel,
    messageCount: row.messageCount,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

export function messageRecord(message: StoredMessage, showSources: boolean) {
  return {
    _id: message.id,
    role: message.role,
    content: message.content,
    status: message.status,
    replyTo: message.replyTo,
    sources: showSources ? message.sources : undefined,
    followUpQuestions: message.followUpQuestions,
    answeredBy: message.answeredBy,
    error: message.error,
    feedback: message.feedback,
    createdAt: message.createdAt,
  };
}

export async function createConversation(
  env: Env,
  chatbot: ChatbotRow,
  actor: ConversationActor,
  name: string,
): Promise<ConversationRow> {
  const now = new Date().toISOString();
  const row: ConversationRow = {
    id: newId(),
    chatbotId: chatbot.id,
    orgId: chatbot.orgId,
    ownerId: actor.kind === "user" ? actor.userId : null,
    visitorId: actor.kind === "visitor" ? actor.visitorId : null,
    channel: actor.kind === "user" ? "api" : actor.kind === "visitor" ? "visitor" : actor.channel,
    channelKey: actor.kind === "channel" ? `${actor.channel}:${actor.key}` : null,
    name,
    messageCount: 0,
    createdAt: now,
    updatedAt: now,
  };
  await database(env).insert(chatbotConversations).values(row);
  return row;
}

/** A conversation of this chatbot that belongs to this actor, else 404. */
export async function findConversation(
  env: Env,
  chatbot: ChatbotRow,
  actor: ConversationActor,
  conversationId: string,
): Promise<ConversationRow> {
  const rows = await database(env)
    .select()
    .from(chatbotConversations)
    .where(
      and(
        eq(chatbotConversations.id, conversationId),
        eq(chatbotConversations.chatbotId, chatbot.id),
        eq(chatbotConversations.orgId, chatbot.orgId),
        actorFilter(actor),
      ),
    )
    .limit(1);
  if (!rows[0]) throw notFound("conversation");
  return rows[0];
}

/** The integration caller's one running conversation (a phone number, a workspace channel), if any. */
export async function findChannelConversation(
  env: Env,
  chatbot: ChatbotRow,
  channel: "telephony" | "chatworkspace",
  key: string,
): Promise<ConversationRow | null> {
  const rows = await database(env)
    .select()
    .from(chatbotConversations)
    .where(
      and(eq(chatbotConversations.chatbotId, chatbot.id), eq(chatbotConversations.channelKey, `${channel}:${key}`)),
    )
    .limit(1);
  return rows[0] ?? null;
}

/** A signed-in user's own conversation, by id alone (Group B routes name no chatbot). */
export async function findOwnConversation(
  env: Env,
  auth: AuthContext,
  conversationId: string,
): Promise<ConversationRow> {
  const rows = await database(env)
    .select()
    .from(chatbotConversations)
    .where(
      and(
        eq(chatbotConversations.id, conversationId),
        eq(chatbotConversations.orgId, auth.orgId),
        eq(chatbotConversations.ownerId, auth.userId),
        isNull(chatbotConversations.visitorId),
      ),
    )
    .limit(1);
  if (!rows[0]) throw notFound("conversation");
  return rows[0];
}

export async function recordTurn(env: Env, conversationId: string): Promise<void> {
  await database(env)
    .update(chatbotConversations)
    .set({ messageCount: sql`${chatbotConversations.messageCount} + 2`, updatedAt: new Date().toISOString() })
    .where(eq(chatbotConversations.id, conversationId));
}

export async function listConversations(
  env: Env,
  orgId: string,
  actor: ConversationActor,
  chatbotId: string | undefined,
  limit: number,
): Promise<ConversationRow[]> {
  const where = chatbotId
    ? and(eq(chatbotConversations.orgId, orgId), actorFilter(actor), eq(chatbotConversations.chatbotId, chatbotId))
    : and(eq(chatbotConversations.orgId, orgId), actorFilter(actor));
  return database(env)
    .select()
    .from(chatbotConversations)
    .where(where)
    .orderBy(desc(chatbotConversations.updatedAt), desc(chatbotConversations.id))
    .limit(limit);
}

export async function readConversation(env: Env, row: ConversationRow, showSources: boolean) {
  const { messages, attachments } = await conversationStub(env, row.id).read();
  return {
    ...conversationRecord(row),
    messages: messages.map((m) => messageRecord(m, showSources)),
    attachments: attachments.map((a) => ({
      _id: a.id,
      name: a.name,
      mimeType: a.mimeType,
      size: a.size,
      createdAt: a.createdAt,
    })),
  };
}

export async function renameConversation(env: Env, row: ConversationRow, name: string): Promise<ConversationRow> {
  const updatedAt = new Date().toISOString();
  await database(env).update(chatbotConversations).set({ name, updatedAt }).where(eq(chatbotConversations.id, row.id));
  return { ...row, name, updatedAt };
}

/** Removes the index row first (so the conversation disappears at once), then its messages and files. */
export async function deleteConversations(env: Env, ids: string[]): Promise<void> {
  for (const id of ids) {
    await database(env).delete(chatbotConversations).where(eq(chatbotConversations.id, id));
    const keys = await conversationStub(env, id).destroy();
    await deleteFiles(env, keys);
  }
}

export function feedbackValue(input: Pick<FeedbackInput, "like" | "feedback">): "like" | "dislike" | null {
  if (input.feedback) return input.feedback === "none" ? null : input.feedback;
  if (input.like === undefined)
    throw invalidInput(["body", "like"], "give like (true or false) or feedback (like, dislike or none)", "missing");
  return input.like ? "like" : "dislike";
}

export async function setMessageFeedback(
  env: Env,
  row: ConversationRow,
  messageId: string,
  feedback: "like" | "dislike" | null,
): Promise<void> {
  const outcome = await conversationStub(env, row.id).setFeedback(messageId, feedback);
  if (outcome === "not_found") throw notFound("message");
  if (outcome === "not_an_answer") throw badRequest("only the chatbot's answers can be liked or disliked");
}
