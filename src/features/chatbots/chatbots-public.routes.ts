import type { Context } from "hono";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { cors } from "hono/cors";
import type { AppBindings } from "../../env";
import { asStream, defineRoute } from "../../lib/route";
import {
  ChatbotRunResult,
  ConversationRead,
  ConversationsResult,
  FeedbackResult,
  PublicChatbotProfile,
  UploadResult,
  VisitorSessionResult,
} from "./chatbots.responses";
import { AppError, badRequest } from "../../lib/errors";
import { verifyPassword } from "../../lib/crypto";
import { authenticate } from "../../middleware/auth";
import { clientIdentity } from "../../middleware/client-identity";
import {
  ChatbotIdParams,
  SessionBody,
  VisitorConversationParams,
  VisitorFeedbackBody,
  VisitorRunBody,
  VisitorUploadBody,
} from "./chatbots.schemas";
import { canRun, type ChatbotRow } from "./chatbots.service";
import { executeRun, prepareRun, publicResult } from "./chatbot-run";
import { streamAnswer } from "./chatbot-stream";
import { attachUploads, MAX_UPLOAD_BODY_BYTES } from "./chatbot-uploads";
import {
  conversationRecord,
  feedbackValue,
  findConversation,
  listConversations,
  readConversation,
  setMessageFeedback,
  type ConversationActor,
} from "./conversations.service";
import { publicProfile, visitorInputs } from "./deployment.service";
import {
  accessOf,
  assertOriginAllowed,
  corsOriginFor,
  consumeRateLimit,
  getDeployedChatbot,
  issueVisitorSession,
  verifyVisitorSession,
  visitorRateLimit,
  type VisitorSession,
} from "./visitor-access";

const SESSION_HEADER = "x-visitor-session";
/** A visitor's message may carry audio (10 MiB, about 14 MiB as base64). */
const MAX_VISITOR_RUN_BYTES = 16 * 1024 * 1024;
/** New sessions per client address per minute, so nobody mints sessions to dodge the per-visitor limit. */
const SESSIONS_PER_IP_PER_MINUTE = 30;

/** A deployed chatbot reachable from this request's origin. */
async function reachableChatbot(c: Context<AppBindings>, chatbotId: string): Promise<ChatbotRow> {
  const row = await getDeployedChatbot(c.env, chatbotId);
  assertOriginAllowed(row, {
    origin: c.req.header("origin"),
    self: new URL(c.req.url).origin,
    fetchSite: c.req.header("sec-fetch-site"),
  });
  return row;
}

async function newSession(c: Context<AppBindings>, row: ChatbotRow, password: string | undefined) {
  await consumeRateLimit(c.env, `session-ip:${row.id}:${clientIdentity(c)}`, SESSIONS_PER_IP_PER_MINUTE);
  const access = accessOf(row);
  let userId: string | null = null;
  if (access.mode === "password") {
    if (!password || !access.password_hash || !(await verifyPassword(password, access.password_hash)))
      throw new AppError("unauthorized", "wrong or missing password for this chatbot");
  } else if (access.mode === "members") {
    const auth = await authenticate(c, "bearer");
    if (auth.orgId !== row.orgId || !canRun(row, auth))
      throw new AppError("forbidden", "only permitted members of the chatbot's organization may use it");
    userId = auth.userId;
  }
  return issueVisitorSession(c.env, row, userId);
}

/** The visitor's session from the header (or body); public chatbots start one for a first-time visitor. */
async function visitorSession(
  c: Context<AppBindings>,
  row: ChatbotRow,
  bodyToken: string | undefined,
  mayStart: boolean,
): Promise<{ session: VisitorSession; issued: string | null }> {
  const token = c.req.header(SESSION_HEADER) ?? bodyToken;
  if (token) return { session: await verifyVisitorSession(c.env, row, token), issued: null };
  if (mayStart && (accessOf(row).mode ?? "public") === "public") {
    const fresh = await newSession(c, row, undefined);
    return { session: fresh.session, issued: fresh.token };
  }
  throw new AppError(
    "unauthorized",
    "a valid visitor session is required: POST /chatbots/deployed/{chatbot_id}/session",
  );
}

const actorOf = (session: VisitorSession): ConversationActor => ({ kind: "visitor", visitorId: session.visitorId });
const showsSources = (row: ChatbotRow): boolean => row.deployment.show_sources ?? false;

export function registerPublicChatbotRoutes(app: OpenAPIHono<AppBindings>): void {
  const pub = { group: "B", auth: "none", tags: ["Deployed chatbots"] } as const;

  // Embedding sites call these from the browser. CORS answers only the chatbot's allowed origins
  // (any origin when it names none); each route checks them again and refuses with a 403.
  const embedding = cors({
    origin: (origin, c) => corsOriginFor(c.env as AppBindings["Bindings"], c.req.path, origin),
    allowMethods: ["GET", "POST", "OPTIONS"],
    allowHeaders: ["content-type", "authorization", SESSION_HEADER],
    exposeHeaders: [SESSION_HEADER],
    maxAge: 600,
  });
  app.use("/chatbots/deployed/*", embedding);
  app.use("/chatbots/upload", embedding);

  defineRoute(
    app,
    {
      ...pub,
      method: "get",
      path: "/chatbots/deployed/:chatbot_id",
      response: PublicChatbotProfile,
      summary: "A deployed chatbot's public profile (no auth); nothing private",
      params: ChatbotIdParams,
      responses: { 404: "Unknown or undeployed chatbot" },
    },
    async (c, { params }) => {
      const row = await getDeployedChatbot(c.env, params.chatbot_id);
      const canTranscribe =
        visitorInputs(row).speech && (await c.get("deps").chatbotServices(c.env).canTranscribe(row.orgId));
      return c.json({ status: "success", chatbot: publicProfile(row, canTranscribe) });
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "post",
      path: "/chatbots/deployed/:chatbot_id/session",
      response: VisitorSessionResult,
      summary:
        "Start a visitor session: give the password, or a member's bearer token, as the chatbot's access requires",
      params: ChatbotIdParams,
      body: SessionBody,
      responses: {
        401: "Wrong password or no credentials",
        403: "Origin or member not allowed",
        404: "Unknown or undeployed chatbot",
        429: "Too many sessions",
      },
    },
    async (c, { params, body }) => {
      const row = await reachableChatbot(c, params.chatbot_id);
      const { token, session } = await newSession(c, row, body.password);
      return c.json({
        status: "success",
        visitor_session: token,
        expires_at: new Date(session.expiresAt * 1000).toISOString(),
      });
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "post",
      path: "/chatbots/deployed/:chatbot_id/run",
      response: ChatbotRunResult,
      summary: "A visitor sends a message to a deployed chatbot",
      description: `Send the session in the \`${SESSION_HEADER}\` header (or \`visitor_session\`). A public chatbot starts a session for a first-time visitor and returns it as \`visitor_session\`. Answers like /v1/chatbot/{id}/run, streaming included.`,
      params: ChatbotIdParams,
      body: VisitorRunBody,
      maxBodyBytes: MAX_VISITOR_RUN_BYTES,
      streams: true,
      responses: {
        401: "Session required",
        403: "Origin not allowed",
        404: "Unknown or undeployed chatbot, or not your conversation",
        429: "Rate limit",
      },
    },
    async (c, { params, body }) => {
      const env = c.env;
      // Visitors may not narrow the owner's knowledge: a metadata filter would let them probe metadata the answers never show.
      if (body.filter !== undefined) throw badRequest("filter: is not available to visitors of a deployed chatbot");
      const row = await reachableChatbot(c, params.chatbot_id);
      if (body.audio !== undefined && !visitorInputs(row).speech)
        throw new AppError("forbidden", "this chatbot does not take audio from visitors; send text");
      const { session, issued } = await visitorSession(c, row, body.visitor_session, true);
      const limit = visitorRateLimit(row);
      await consumeRateLimit(env, `run:${row.id}:${session.visitorId}`, limit);
      await consumeRateLimit(env, `run-ip:${row.id}:${clientIdentity(c)}`, limit * 5);
      const svc = c.get("deps").chatbotServices(env);
      const prepared = await prepareRun(env, svc, row, actorOf(session), body, showsSources(row));
      const extra = issued ? { visitor_session: issued } : {};
      if (issued) c.header(SESSION_HEADER, issued);
      if (body.stream) {
        // The session header set above travels with the stream (streamSSE answers through the context).
        return asStream(streamAnswer(c, (onPiece) => executeRun(env, svc, prepared, onPiece), extra));
      }
      const result = await executeRun(env, svc, prepared, () => undefined);
      if (result.failure) throw result.failure;
      return c.json(publicResult(result, extra));
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "get",
      path: "/chatbots/deployed/:chatbot_id/conversations",
      response: ConversationsResult,
      summary: "The visitor's own conversations with a deployed chatbot",
      params: ChatbotIdParams,
      responses: { 401: "Session required", 404: "Unknown or undeployed chatbot" },
    },
    async (c, { params }) => {
      const row = await reachableChatbot(c, params.chatbot_id);
      const { session } = await visitorSession(c, row, undefined, false);
      const rows = await listConversations(c.env, row.orgId, actorOf(session), row.id, 100);
      return c.json({ status: "success", conversations: rows.map(conversationRecord) });
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "get",
      path: "/chatbots/deployed/:chatbot_id/conversations/:conversation_id",
      response: ConversationRead,
      summary: "Read one of the visitor's own conversations",
      params: VisitorConversationParams,
      responses: { 401: "Session required", 404: "Not this visitor's conversation" },
    },
    async (c, { params }) => {
      const row = await reachableChatbot(c, params.chatbot_id);
      const { session } = await visitorSession(c, row, undefined, false);
      const conversation = await findConversation(c.env, row, actorOf(session), params.conversation_id);
      return c.json({
        status: "success",
        conversation: await readConversation(c.env, conversation, showsSources(row)),
      });
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "post",
      path: "/chatbots/deployed/conversations/message/like",
      response: FeedbackResult,
      summary: "A visitor likes or dislikes an answer in their own conversation",
      body: VisitorFeedbackBody,
      responses: { 401: "Session required", 404: "Not this visitor's conversation or message" },
    },
    async (c, { body }) => {
      const feedback = feedbackValue(body);
      const row = await reachableChatbot(c, body.chatbot_id);
      const { session } = await visitorSession(c, row, body.visitor_session, false);
      const conversation = await findConversation(c.env, row, actorOf(session), body.conversation_id);
      await setMessageFeedback(c.env, conversation, body.message_id, feedback);
      return c.json({ status: "success", message_id: body.message_id, feedback });
    },
  );

  defineRoute(
    app,
    {
      ...pub,
      method: "post",
      path: "/chatbots/upload",
      response: UploadResult,
      summary: "A visitor attaches a text document (txt, md, csv, json; at most 1 MiB) to their conversation",
      body: VisitorUploadBody,
      maxBodyBytes: MAX_UPLOAD_BODY_BYTES,
      responses: {
        401: "Session required",
        403: "Origin not allowed, or the chatbot's allow_uploads is off",
        404: "Not this visitor's conversation",
        413: "File too large",
        429: "Rate limit",
      },
    },
    async (c, { body }) => {
      const row = await reachableChatbot(c, body.chatbot_id);
      if (!visitorInputs(row).uploads) throw new AppError("forbidden", "this chatbot does not accept file uploads");
      const { session } = await visitorSession(c, row, body.visitor_session, false);
      await consumeRateLimit(c.env, `run:${row.id}:${session.visitorId}`, visitorRateLimit(row));
      return c.json({ status: "success", ...(await attachUploads(c.env, row, actorOf(session), body)) });
    },
  );
}
