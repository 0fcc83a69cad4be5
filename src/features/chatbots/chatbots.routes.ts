import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { asStream, defineRoute } from "../../lib/route";
import { CreatedId, Success } from "../../lib/response-schemas";
import {
  ChatbotCreated,
  ChatbotList,
  ChatbotObject,
  ChatbotRunResult,
  ChatbotsResult,
  ConversationRead,
  ConversationResult,
  ConversationsResult,
  DeployResult,
  FeedbackResult,
  TerminateResult,
  UndeployResult,
  UploadResult,
} from "./chatbots.responses";
import { FetchQuery, ListQuery, listEnvelope } from "../../lib/ownership";
import { notFound } from "../../lib/errors";
import {
  AccessBody,
  ChatbotCreateBody,
  ChatbotIdParams,
  ChatbotRef,
  ChatWorkspaceBody,
  ConversationIdParams,
  ConversationRef,
  ConversationsQuery,
  DeployBody,
  DeploymentBody,
  FeedbackBody,
  IdParams,
  RbacBody,
  RenameBody,
  RunBody,
  TelephonyBody,
  TerminateBody,
  UploadBody,
} from "./chatbots.schemas";
import {
  assertCanRun,
  chatbotRecord,
  deleteChatbot,
  fetchChatbot,
  getVisibleChatbot,
  listChatbots,
} from "./chatbots.service";
import { createChatbot } from "./chatbot-create";
import { executeRun, prepareRun, publicResult } from "./chatbot-run";
import { streamAnswer } from "./chatbot-stream";
import { attachUploads, MAX_UPLOAD_BODY_BYTES } from "./chatbot-uploads";
import {
  conversationRecord,
  conversationStub,
  deleteConversations,
  feedbackValue,
  findConversation,
  findOwnConversation,
  listConversations,
  readConversation,
  renameConversation,
  setMessageFeedback,
} from "./conversations.service";
import {
  deploy,
  undeploy,
  updateAccess,
  updateChatWorkspace,
  updateDeployment,
  updateRbac,
  updateTelephony,
} from "./deployment.service";
import { registerPublicChatbotRoutes } from "./chatbots-public.routes";
import { registerChatPageRoutes } from "./chat-page.routes";
import { registerChatbotWebhookRoutes } from "./chatbot-webhooks.routes";

export function registerChatbotRoutes(app: OpenAPIHono<AppBindings>): void {
  const a = { group: "A", auth: "api_key", tags: ["Chatbots"] } as const;
  const b = { group: "B", auth: "bearer", tags: ["Chatbots"] } as const;

  // ---- Group A: the public API ----
  defineRoute(
    app,
    {
      ...a,
      method: "post",
      path: "/v1/chatbot",
      response: CreatedId,
      summary: "Create a chatbot answering through a pipeline or through knowledge bases and a model",
      body: ChatbotCreateBody,
      responses: { 409: "You already have a chatbot of that name" },
    },
    async (c, { body }) => {
      const row = await createChatbot(c.env, c.get("auth"), body);
      return c.json({ status: "success", id: row.id });
    },
  );

  defineRoute(
    app,
    {
      ...a,
      method: "get",
      path: "/v1/chatbot",
      response: ChatbotObject,
      summary: "Fetch a chatbot by id or name",
      query: FetchQuery,
      responses: { 404: "No such chatbot" },
    },
    async (c, { query }) =>
      c.json({ status: "success", object: chatbotRecord(await fetchChatbot(c.env, c.get("auth"), query)) }),
  );

  defineRoute(
    app,
    {
      ...a,
      method: "get",
      path: "/v1/chatbots",
      response: ChatbotList,
      summary: "List your chatbots (include_shared: the organization's)",
      query: ListQuery,
    },
    async (c, { query }) =>
      c.json(
        listEnvelope(
          (await listChatbots(c.env, c.get("auth"), query.include_shared)).map(chatbotRecord),
          query.verbose,
        ),
      ),
  );

  defineRoute(
    app,
    {
      ...a,
      method: "delete",
      path: "/v1/chatbot/:id",
      response: Success,
      summary: "Delete a chatbot and all its conversations",
      params: IdParams,
      responses: { 403: "Not yours to delete", 404: "No such chatbot" },
    },
    async (c, { params }) => {
      await deleteConversations(c.env, await deleteChatbot(c.env, c.get("auth"), params.id));
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...a,
      method: "post",
      path: "/v1/chatbot/:id/run",
      response: ChatbotRunResult,
      summary: "Send a message (text or audio) and get the answer",
      description:
        'No `conversation_id` starts a conversation, named from its first message. With `stream: true` the answer arrives as server-sent events `{type: "stream", output_value}` with each new piece of text, then one final event with `status`, `conversation_id`, `output_message`, `follow_up_questions` and `sources` (or `error`). Messages sent at once to one conversation are answered one after another in arrival order.',
      params: IdParams,
      body: RunBody,
      streams: true,
      responses: {
        403: "The chatbot's access rules do not let you run it",
        404: "No such chatbot or conversation",
        503: "An answering service is not installed",
      },
    },
    async (c, { params, body }) => {
      const env = c.env;
      const auth = c.get("auth");
      const chatbot = await getVisibleChatbot(env, auth, params.id);
      assertCanRun(chatbot, auth);
      const svc = c.get("deps").chatbotServices(env);
      const prepared = await prepareRun(env, svc, chatbot, { kind: "user", userId: auth.userId }, body, true);
      if (body.stream) return asStream(streamAnswer(c, (onPiece) => executeRun(env, svc, prepared, onPiece), {}));
      const result = await executeRun(env, svc, prepared, () => undefined);
      if (result.failure) throw result.failure;
      return c.json(publicResult(result));
    },
  );

  defineRoute(
    app,
    {
      ...a,
      method: "post",
      path: "/v1/chatbot/:id/terminate",
      response: TerminateResult,
      summary: "Stop the answer being produced in a conversation, and any message waiting behind it",
      params: IdParams,
      body: TerminateBody,
      responses: { 404: "No such chatbot or conversation" },
    },
    async (c, { params, body }) => {
      const auth = c.get("auth");
      const chatbot = await getVisibleChatbot(c.env, auth, params.id);
      const conversation = await findConversation(
        c.env,
        chatbot,
        { kind: "user", userId: auth.userId },
        body.conversation_id,
      );
      const { terminated } = await conversationStub(c.env, conversation.id).terminate();
      return c.json({ status: "success", terminated });
    },
  );

  defineRoute(
    app,
    {
      ...a,
      method: "post",
      path: "/v1/chatbot/:id/upload",
      response: UploadResult,
      summary:
        "Attach text documents (txt, md, csv, json; at most 1 MiB each) to a conversation: one part `file`, or up to 10 parts `files` (the hosted SDK's form); their text informs later answers",
      params: IdParams,
      body: UploadBody,
      maxBodyBytes: MAX_UPLOAD_BODY_BYTES,
      responses: { 404: "No such chatbot or conversation", 413: "File too large" },
    },
    async (c, { params, body }) => {
      const auth = c.get("auth");
      const chatbot = await getVisibleChatbot(c.env, auth, params.id);
      assertCanRun(chatbot, auth);
      return c.json({
        status: "success",
        ...(await attachUploads(c.env, chatbot, { kind: "user", userId: auth.userId }, body)),
      });
    },
  );

  // ---- Group B: the application backend. Static paths first: `/chatbots/:id` would swallow them. ----
  defineRoute(
    app,
    {
      ...b,
      method: "get",
      path: "/chatbots",
      response: ChatbotList,
      summary: "List your chatbots (include_shared: the organization's)",
      query: ListQuery,
    },
    async (c, { query }) =>
      c.json(listEnvelope((await listChatbots(c.env, c.get("auth"), query.include_shared)).map(chatbotRecord), true)),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/create",
      response: ChatbotCreated,
      summary: "Create a chatbot",
      body: ChatbotCreateBody,
      responses: { 409: "You already have a chatbot of that name" },
    },
    async (c, { body }) => {
      const row = await createChatbot(c.env, c.get("auth"), body);
      return c.json({ status: "success", id: row.id, chatbot: chatbotRecord(row) });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "delete",
      path: "/chatbots/delete",
      response: Success,
      summary: "Delete a chatbot and all its conversations",
      body: ChatbotRef,
      responses: { 403: "Not yours to delete", 404: "No such chatbot" },
    },
    async (c, { body }) => {
      await deleteConversations(c.env, await deleteChatbot(c.env, c.get("auth"), body.chatbot_id));
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "get",
      path: "/chatbots/browser-extension-chatbots",
      response: ChatbotsResult,
      summary: "Your chatbots enabled for the browser extension",
    },
    async (c) =>
      c.json({
        status: "success",
        chatbots: (await listChatbots(c.env, c.get("auth"), false, true)).map(chatbotRecord),
      }),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "get",
      path: "/chatbots/conversations",
      response: ConversationsResult,
      summary: "Your conversations, newest first (optionally of one chatbot)",
      query: ConversationsQuery,
    },
    async (c, { query }) => {
      const auth = c.get("auth");
      const rows = await listConversations(
        c.env,
        auth.orgId,
        { kind: "user", userId: auth.userId },
        query.chatbot_id,
        query.limit,
      );
      return c.json({ status: "success", conversations: rows.map(conversationRecord) });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/conversations/update/name",
      response: ConversationResult,
      summary: "Rename one of your conversations",
      body: RenameBody,
      responses: { 404: "No such conversation of yours" },
    },
    async (c, { body }) => {
      const row = await findOwnConversation(c.env, c.get("auth"), body.conversation_id);
      return c.json({
        status: "success",
        conversation: conversationRecord(await renameConversation(c.env, row, body.name)),
      });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/conversations/message/like",
      response: FeedbackResult,
      summary: "Like or dislike one of the chatbot's answers in your conversation",
      body: FeedbackBody,
      responses: { 404: "No such chatbot, conversation or message" },
    },
    async (c, { body }) => {
      const auth = c.get("auth");
      const feedback = feedbackValue(body);
      const chatbot = await getVisibleChatbot(c.env, auth, body.chatbot_id);
      const conversation = await findConversation(
        c.env,
        chatbot,
        { kind: "user", userId: auth.userId },
        body.conversation_id,
      );
      await setMessageFeedback(c.env, conversation, body.message_id, feedback);
      return c.json({ status: "success", message_id: body.message_id, feedback });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "delete",
      path: "/chatbots/conversations/delete",
      response: Success,
      summary: "Delete one of your conversations and its messages",
      body: ConversationRef,
      responses: { 404: "No such conversation of yours" },
    },
    async (c, { body }) => {
      const row = await findOwnConversation(c.env, c.get("auth"), body.conversation_id);
      if (body.chatbot_id && body.chatbot_id !== row.chatbotId) throw notFound("conversation");
      await deleteConversations(c.env, [row.id]);
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "get",
      path: "/chatbots/conversations/:conversation_id",
      response: ConversationRead,
      summary: "Read one of your conversations with its messages",
      params: ConversationIdParams,
      responses: { 404: "No such conversation of yours" },
    },
    async (c, { params }) => {
      const row = await findOwnConversation(c.env, c.get("auth"), params.conversation_id);
      return c.json({ status: "success", conversation: await readConversation(c.env, row, true) });
    },
  );

  const settings = { 403: "You may not change this chatbot", 404: "No such chatbot" };
  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/deploy",
      response: DeployResult,
      summary: "Deploy a chatbot: its public profile and visitor run route go live",
      body: DeployBody,
      responses: settings,
    },
    async (c, { body }) => {
      const row = await deploy(c.env, c.get("auth"), body);
      return c.json({
        status: "success",
        chatbot_id: row.id,
        deployed: true,
        public_url: `/chatbots/deployed/${row.id}`,
        share_url: `/chat/${row.id}`,
        widget_script: "/widget.js",
        object: chatbotRecord(row),
      });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "delete",
      path: "/chatbots/undeploy/:chatbot_id",
      response: UndeployResult,
      summary: "Take a chatbot off its public surface",
      params: ChatbotIdParams,
      responses: settings,
    },
    async (c, { params }) => {
      const row = await undeploy(c.env, c.get("auth"), params.chatbot_id);
      return c.json({ status: "success", chatbot_id: row.id, deployed: false });
    },
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/update/deployment",
      response: ChatbotObject,
      summary: "Presentation: display name, greeting, colours, avatar, suggested questions, whether to show sources",
      body: DeploymentBody,
      responses: settings,
    },
    async (c, { body }) =>
      c.json({ status: "success", object: chatbotRecord(await updateDeployment(c.env, c.get("auth"), body)) }),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/update/access",
      response: ChatbotObject,
      summary:
        "Who may talk to the deployed chatbot: public, password, or signed-in members; allowed embedding origins; rate limit",
      body: AccessBody,
      responses: settings,
    },
    async (c, { body }) =>
      c.json({ status: "success", object: chatbotRecord(await updateAccess(c.env, c.get("auth"), body)) }),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/update/rbac",
      response: ChatbotObject,
      summary: "Which users and roles may edit or run the chatbot",
      body: RbacBody,
      responses: settings,
    },
    async (c, { body }) =>
      c.json({ status: "success", object: chatbotRecord(await updateRbac(c.env, c.get("auth"), body)) }),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/update/telephony",
      response: ChatbotObject,
      summary: "Telephony integration: account, phone number and the (write-only) auth token that signs its webhooks",
      body: TelephonyBody,
      responses: settings,
    },
    async (c, { body }) =>
      c.json({ status: "success", object: chatbotRecord(await updateTelephony(c.env, c.get("auth"), body)) }),
  );

  defineRoute(
    app,
    {
      ...b,
      method: "post",
      path: "/chatbots/update/chatworkspace",
      response: ChatbotObject,
      summary: "Chat workspace integration: team, signing secret and bot token (both write-only)",
      body: ChatWorkspaceBody,
      responses: settings,
    },
    async (c, { body }) =>
      c.json({ status: "success", object: chatbotRecord(await updateChatWorkspace(c.env, c.get("auth"), body)) }),
  );

  registerPublicChatbotRoutes(app);
  registerChatPageRoutes(app);
  registerChatbotWebhookRoutes(app);

  defineRoute(
    app,
    {
      ...b,
      method: "get",
      path: "/chatbots/:id",
      response: ChatbotObject,
      summary: "Fetch one chatbot of your organization",
      params: IdParams,
      responses: { 404: "No such chatbot" },
    },
    async (c, { params }) =>
      c.json({ status: "success", object: chatbotRecord(await getVisibleChatbot(c.env, c.get("auth"), params.id)) }),
  );
}
