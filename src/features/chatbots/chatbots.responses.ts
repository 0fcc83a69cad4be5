import { z } from "@hono/zod-openapi";
import { ownedRecordShape } from "../../lib/response-schemas";

const Role = z.enum(["owner", "admin", "member", "viewer"]);

/** A deployed chatbot's look and greeting, as saved. */
const DeploymentSettings = z
  .object({
    display_name: z.string(),
    greeting: z.string(),
    primary_color: z.string(),
    secondary_color: z.string(),
    avatar_url: z.string(),
    suggested_questions: z.array(z.string()),
    show_sources: z.boolean(),
    position: z.enum(["left", "right"]),
    allow_uploads: z.boolean(),
    speech_to_text: z.boolean(),
  })
  .partial();

/** A chatbot as its organization sees it; secrets show only as their has... and ...LastFour fields. */
export const ChatbotRecord = z
  .object({
    ...ownedRecordShape,
    pipeline: z
      .object({
        id: z.string().nullable(),
        object_id: z.string().nullable(),
        input: z.string().nullable(),
        output: z.string().nullable(),
      })
      .openapi({
        description: "The pipeline the chatbot runs; its ids are null for a chatbot answering through knowledge bases",
      }),
    input: z
      .string()
      .nullable()
      .openapi({ description: "The pipeline input the message goes to (the hosted SDK's name)" }),
    output: z.string().nullable().openapi({ description: "The pipeline output that answers (the hosted SDK's name)" }),
    knowledgeBaseIds: z.array(z.string()),
    queryOptions: z.record(z.string(), z.unknown()),
    systemPrompt: z.string().nullable(),
    model: z.string().nullable(),
    followUpQuestions: z.number().int(),
    browserExtension: z.boolean(),
    deployed: z.boolean(),
    deployedAt: z.string().nullable(),
    deployment: DeploymentSettings,
    access: z.object({
      mode: z.string(),
      hasPassword: z.boolean(),
      allowedOrigins: z.array(z.string()),
      rateLimitPerMinute: z.number().int(),
    }),
    rbac: z
      .object({
        editors: z.array(z.string()),
        editor_roles: z.array(Role),
        runners: z.array(z.string()),
        runner_roles: z.array(Role),
      })
      .partial(),
    telephony: z.object({
      accountSid: z.string().nullable(),
      phoneNumber: z.string().nullable(),
      enabled: z.boolean(),
      hasAuthToken: z.boolean(),
      authTokenLastFour: z.string().nullable(),
    }),
    chatworkspace: z.object({
      teamId: z.string().nullable(),
      apiBaseUrl: z.string().nullable(),
      enabled: z.boolean(),
      hasSigningSecret: z.boolean(),
      hasBotToken: z.boolean(),
      botTokenLastFour: z.string().nullable(),
    }),
    // The same settings under the hosted SDK's snake_case names (`Chatbot.fetch` reads these).
    deployment_options: DeploymentSettings.extend({ browser_extension: z.boolean() }),
    access_config: z.object({
      mode: z.string(),
      has_password: z.boolean(),
      allowed_origins: z.array(z.string()),
      rate_limit_per_minute: z.number().int(),
    }),
    twilio_config: z.object({
      account_sid: z.string().nullable(),
      phone_number: z.string().nullable(),
      enabled: z.boolean(),
      has_auth_token: z.boolean(),
      auth_token_last_four: z.string().nullable(),
    }),
    slack_config: z.object({
      team_id: z.string().nullable(),
      api_base_url: z.string().nullable(),
      enabled: z.boolean(),
      has_signing_secret: z.boolean(),
      has_bot_token: z.boolean(),
      bot_token_last_four: z.string().nullable(),
    }),
  })
  .openapi("ChatbotRecord");

export const ConversationRecord = z
  .object({
    _id: z.string(),
    chatbotId: z.string(),
    name: z.string(),
    channel: z.enum(["api", "visitor", "telephony", "chatworkspace"]),
    messageCount: z.number().int(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("ConversationRecord");

const MessageSource = z
  .object({
    knowledgeBaseId: z.string(),
    documentId: z.string(),
    chunkId: z.string(),
    name: z.string().nullable(),
    score: z.number(),
    text: z.string(),
  })
  .openapi("MessageSource");

export const MessageRecord = z
  .object({
    _id: z.string(),
    role: z.enum(["user", "assistant"]),
    content: z.string(),
    status: z.enum(["pending", "complete", "failed", "terminated"]),
    replyTo: z.string().nullable(),
    sources: z.array(MessageSource).optional().openapi({ description: "Only where the chatbot shows its sources" }),
    followUpQuestions: z.array(z.string()),
    answeredBy: z.string().nullable(),
    error: z.string().nullable(),
    feedback: z.enum(["like", "dislike"]).nullable(),
    createdAt: z.string(),
  })
  .openapi("MessageRecord");

const AttachmentRecord = z
  .object({ _id: z.string(), name: z.string(), mimeType: z.string(), size: z.number().int(), createdAt: z.string() })
  .openapi("AttachmentRecord");

export const ConversationWithMessages = ConversationRecord.extend({
  messages: z.array(MessageRecord),
  attachments: z.array(AttachmentRecord),
}).openapi("ConversationWithMessages");

const ok = { status: z.literal("success") };
export const ChatbotCreated = z.object({ ...ok, id: z.string(), chatbot: ChatbotRecord }).openapi("ChatbotCreated");
export const ChatbotObject = z.object({ ...ok, object: ChatbotRecord }).openapi("ChatbotObject");
export const ChatbotList = z
  .object({ ...ok, object_ids: z.array(z.string()), objects: z.array(ChatbotRecord) })
  .openapi("ChatbotList");
export const ChatbotsResult = z.object({ ...ok, chatbots: z.array(ChatbotRecord) }).openapi("ChatbotsResult");
export const ConversationsResult = z
  .object({ ...ok, conversations: z.array(ConversationRecord) })
  .openapi("ConversationsResult");
export const ConversationResult = z.object({ ...ok, conversation: ConversationRecord }).openapi("ConversationResult");
export const ConversationRead = z.object({ ...ok, conversation: ConversationWithMessages }).openapi("ConversationRead");
export const FeedbackResult = z
  .object({ ...ok, message_id: z.string(), feedback: z.enum(["like", "dislike"]).nullable() })
  .openapi("FeedbackResult");
export const TerminateResult = z.object({ ...ok, terminated: z.number().int() }).openapi("ChatbotTerminateResult");
/** One `file` answers its attachment; `files` (the hosted SDK's form) answer each file's document in the conversation's knowledge base. */
export const UploadResult = z
  .union([
    z.object({ ...ok, conversation_id: z.string(), attachment: AttachmentRecord }),
    z.object({
      ...ok,
      conversation_id: z.string(),
      knowledge_base_id: z.string(),
      uploaded_files: z.array(
        z.object({ name: z.string(), mime_type: z.string(), size: z.number().int(), document_id: z.string() }),
      ),
      document_id: z.array(z.string()),
    }),
  ])
  .openapi("ChatbotUploadResult");
export const DeployResult = z
  .object({ ...ok, chatbot_id: z.string(), deployed: z.literal(true), public_url: z.string(), object: ChatbotRecord })
  .openapi("ChatbotDeployResult");
export const UndeployResult = z
  .object({ ...ok, chatbot_id: z.string(), deployed: z.literal(false) })
  .openapi("ChatbotUndeployResult");

/** A run's answer (also the last server-sent event of a streamed run). */
export const ChatbotRunResult = z
  .object({
    status: z.enum(["success", "failed"]),
    conversation_id: z.string(),
    message_id: z.string().nullable(),
    output_message: z.string(),
    follow_up_questions: z.array(z.string()),
    answered_by: z.string().nullable(),
    sources: z.array(MessageSource).optional(),
    error: z.string().optional(),
  })
  .catchall(z.unknown())
  .openapi("ChatbotRunResult");

export const PublicChatbotProfile = z
  .object({
    ...ok,
    chatbot: z.object({
      _id: z.string(),
      name: z.string(),
      description: z.string(),
      greeting: z.string().nullable(),
      primaryColor: z.string().nullable(),
      secondaryColor: z.string().nullable(),
      avatarUrl: z.string().nullable(),
      suggestedQuestions: z.array(z.string()),
      showSources: z.boolean(),
      position: z.enum(["left", "right"]),
      access: z.object({ mode: z.string() }),
      followUpQuestions: z.boolean(),
      allowUploads: z.boolean(),
      speechToText: z.boolean(),
    }),
  })
  .openapi("PublicChatbotProfile");
export const VisitorSessionResult = z
  .object({ ...ok, visitor_session: z.string(), expires_at: z.string() })
  .openapi("VisitorSessionResult");
/** The URL verification challenge echoed back, or the event's acknowledgement (the answer is posted through the workspace's API). */
export const WebhookReply = z
  .union([z.object({ challenge: z.string() }), z.object({ ok: z.literal(true), ignored: z.boolean().optional() })])
  .openapi("ChatWorkspaceWebhookReply");
