import { z } from "@hono/zod-openapi";
import { ROLES } from "../../env";
import { zArray, zBool, zId, zInt, zJsonObject, zNumber, zString } from "../../lib/schema";
import { BlockedUrlError, checkUrl } from "../../lib/ssrf-guard";
import { MAX_FILTER_CHARS } from "../knowledge-bases/knowledge-bases.schemas";

/** `<connection>/<model>`: the connection name as the connections feature allows it, then the provider's model name. */
const ModelName = z
  .string()
  .max(264)
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}\/[A-Za-z0-9._:@/-]{1,200}$/, "must be <connection>/<model>");

const PipelineRef = zJsonObject(
  z
    .object({
      id: zId(),
      input: zString(1, 100)
        .optional()
        .openapi({ description: "The pipeline input that receives the message (default `query`)." }),
      output: zString(1, 100)
        .optional()
        .openapi({ description: "The pipeline output that is the answer (default: its first output)." }),
    })
    .strict(),
);

const QueryOptions = zJsonObject(
  z
    .object({
      top_k: zInt(1, 50).optional(),
      score_cutoff: zNumber(0, 1).optional(),
    })
    .strict(),
);

export const IdParams = z.object({ id: zId() });
export const ChatbotIdParams = z.object({ chatbot_id: zId() });
export const ConversationIdParams = z.object({ conversation_id: zId() });
export const VisitorConversationParams = z.object({ chatbot_id: zId(), conversation_id: zId() });
export const ChatbotRef = z.object({ chatbot_id: zId() }).openapi("Body_chatbot_ref");

/** Audio as base64 text, or a multipart file part (which the body parser turns into this shape). */
const AudioField = z.union([
  zString(1, 14_000_000),
  z.object({
    type: z.literal("file"),
    raw_bytes: zString(1, 14_000_000),
    metadata: z.object({ name: z.string().max(500), mime_type: z.string().max(200), size: z.number() }),
  }),
]);

export const RunBody = z
  .object({
    text: zString(1, 20_000).optional(),
    audio: AudioField.optional().openapi({ description: "Base64 audio, or a multipart file part named `audio`." }),
    audio_mime_type: zString(1, 100).optional(),
    conversation_id: zId().optional(),
    stream: zBool().optional().default(false),
    filter: z
      .union([z.string().max(MAX_FILTER_CHARS), z.record(z.string(), z.unknown())])
      .optional()
      .openapi({
        description:
          "Knowledge-base chatbots only: the SDK's `{filter_items, selection_mode}` (which of the chatbot's knowledge bases and documents to search), or a metadata filter in the knowledge-base query's `filter` language.",
      }),
  })
  .openapi("Body_run_chatbot");
export type RunInput = z.output<typeof RunBody>;

export const VisitorRunBody = RunBody.extend({ visitor_session: zString(1, 500).optional() }).openapi(
  "Body_run_deployed_chatbot",
);

export const TerminateBody = z.object({ conversation_id: zId() }).openapi("Body_terminate_chatbot");

const FilePart = z.object({
  type: z.literal("file"),
  raw_bytes: z.string(),
  metadata: z.object({ name: z.string().max(500), mime_type: z.string().max(200), size: z.number() }),
});

export const UploadBody = z
  .object({
    conversation_id: zId().optional(),
    file: FilePart.optional().openapi({
      description: "The document (multipart file part). Answer: `{conversation_id, attachment}`.",
    }),
    files: z
      .union([FilePart, z.array(FilePart)])
      .optional()
      .openapi({
        description:
          "The hosted SDK's form: one or more parts named `files`. Answer: `{conversation_id, knowledge_base_id, uploaded_files, document_id}`.",
      }),
    message_index: zInt(0, 1_000_000)
      .optional()
      .openapi({ description: "Accepted for the hosted SDK; Loom attaches documents to the whole conversation." }),
  })
  .openapi("Body_upload_chatbot_document");

export const VisitorUploadBody = UploadBody.extend({
  chatbot_id: zId(),
  visitor_session: zString(1, 500).optional(),
}).openapi("Body_upload_document");

export const ConversationsQuery = z.object({
  chatbot_id: zId().optional(),
  limit: zInt(1, 200).optional().default(50),
});

export const RenameBody = z
  .object({ conversation_id: zId(), name: zString(1, 200) })
  .openapi("Body_update_conversation_name");
export const ConversationRef = z
  .object({ conversation_id: zId(), chatbot_id: zId().optional() })
  .openapi("Body_delete_conversation");

const Feedback = {
  chatbot_id: zId(),
  conversation_id: zId(),
  message_id: zId(),
  like: zBool().optional().openapi({ description: "true: like; false: dislike." }),
  feedback: z
    .enum(["like", "dislike", "none"])
    .optional()
    .openapi({ description: "Alternative to `like`; `none` clears it." }),
};
export const FeedbackBody = z.object(Feedback).openapi("Body_like_message");
export const VisitorFeedbackBody = z
  .object({ ...Feedback, visitor_session: zString(1, 500).optional() })
  .openapi("Body_like_deployed_message");
export type FeedbackInput = z.output<typeof FeedbackBody>;

const Colour = z.string().regex(/^#[0-9a-fA-F]{6}$/, "must be a colour like #1a2b3c");
const HttpsUrl = z
  .string()
  .max(1000)
  .refine((value) => {
    try {
      const url = new URL(value);
      return url.protocol === "https:" && !url.username && !url.password;
    } catch {
      return false;
    }
  }, "must be an https URL without credentials");

export const DeploymentBody = z
  .object({
    chatbot_id: zId(),
    display_name: zString(1, 100).optional(),
    greeting: zString(0, 1000).optional(),
    primary_color: Colour.optional(),
    secondary_color: Colour.optional(),
    avatar_url: HttpsUrl.optional(),
    suggested_questions: zArray(zString(1, 200), 10).optional(),
    show_sources: zBool().optional(),
    position: z
      .enum(["left", "right"])
      .optional()
      .openapi({ description: "Which bottom corner the widget's launcher sits in (default right)." }),
    allow_uploads: zBool().optional().openapi({
      description:
        "Visitors may attach documents through `/chatbots/upload` (default true); false refuses them with 403 and hides the widget's Attach button.",
    }),
    speech_to_text: zBool().optional().openapi({
      description:
        "Visitors may send recorded `audio` (default true), transcribed by the organization's speech-to-text connection; false refuses visitor audio with 403 and hides the widget's microphone.",
    }),
    browser_extension: zBool().optional(),
  })
  .openapi("Body_update_deployment");
export type DeploymentInput = z.output<typeof DeploymentBody>;

export const DeployBody = DeploymentBody.openapi("Body_deploy_chatbot");

const Origin = z
  .string()
  .max(300)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "https:" || url.protocol === "http:") && url.origin === value.replace(/\/$/, "");
    } catch {
      return false;
    }
  }, "must be an origin like https://example.com");

export const AccessBody = z
  .object({
    chatbot_id: zId(),
    mode: z.enum(["public", "password", "members"]).optional().openapi({
      description:
        "public: anyone; password: visitors give a password; members: signed-in members of the organization.",
    }),
    password: zString(8, 200).optional().openapi({ description: "Write-only; stored as a hash." }),
    allowed_origins: zArray(Origin, 50)
      .optional()
      .openapi({ description: "Sites that may embed the chatbot; empty: every site." }),
    rate_limit_per_minute: zInt(1, 1000)
      .optional()
      .openapi({ description: "Messages per visitor per minute (default 20)." }),
  })
  .openapi("Body_update_access");
export type AccessInput = z.output<typeof AccessBody>;

const Role = z.enum(ROLES);
export const RbacBody = z
  .object({
    chatbot_id: zId(),
    editors: zArray(zId(), 200)
      .optional()
      .openapi({ description: "Users who may change the chatbot besides its owner and admins." }),
    editor_roles: zArray(Role, 4).optional(),
    runners: zArray(zId(), 200)
      .optional()
      .openapi({ description: "Users who may run it; with runners and runner_roles both empty, every member may." }),
    runner_roles: zArray(Role, 4).optional(),
  })
  .openapi("Body_update_rbac");
export type RbacInput = z.output<typeof RbacBody>;

export const TelephonyBody = z
  .object({
    chatbot_id: zId(),
    account_sid: zString(1, 100).optional(),
    auth_token: zString(8, 500)
      .optional()
      .openapi({ description: "Signs the provider's webhook requests. Write-only; owner or admin only." }),
    phone_number: z
      .string()
      .regex(/^\+[1-9]\d{6,14}$/, "must be an E.164 number like +15551234567")
      .optional(),
    enabled: zBool().optional(),
  })
  .openapi("Body_update_telephony");
export type TelephonyInput = z.output<typeof TelephonyBody>;

/** The chat workspace's web API lives on these hosts only: replies carry the bot token there. */
export const WORKSPACE_API_HOSTS = ["slack.com", "*.slack.com", "slack-gov.com", "*.slack-gov.com"] as const;
/** Default base address of the chat workspace's web API. */
export const DEFAULT_WORKSPACE_API = "https://slack.com/api";

const WorkspaceApiUrl = z
  .string()
  .max(1000)
  .superRefine((value, ctx) => {
    try {
      checkUrl(value, WORKSPACE_API_HOSTS);
    } catch (error) {
      ctx.addIssue({
        code: "custom",
        message: `must be an https URL on ${WORKSPACE_API_HOSTS.join(", ")}: ${error instanceof BlockedUrlError ? error.reason : "not a valid URL"}`,
      });
    }
  });

export const ChatWorkspaceBody = z
  .object({
    chatbot_id: zId(),
    team_id: zString(1, 100).optional(),
    signing_secret: zString(8, 500)
      .optional()
      .openapi({ description: "Verifies the workspace's signed requests. Write-only; owner or admin only." }),
    bot_token: zString(8, 500)
      .optional()
      .openapi({ description: "Posts replies through the workspace's web API. Write-only; owner or admin only." }),
    api_base_url: WorkspaceApiUrl.optional().openapi({
      description: `The workspace web API's base URL (default ${DEFAULT_WORKSPACE_API}); only the workspace's own hosts. Owner or admin only.`,
    }),
    enabled: zBool().optional(),
  })
  .openapi("Body_update_chatworkspace");
export type ChatWorkspaceInput = z.output<typeof ChatWorkspaceBody>;

export const SessionBody = z.object({ password: zString(1, 200).optional() }).openapi("Body_deployed_session");

/*
 * The option objects of the hosted SDK's `Chatbot.new`, mapped onto Loom's settings routes. The
 * read-only keys a fetched record carries (`has_password`, `..._last_four`) are accepted and
 * ignored, so a fetched record's options can be sent back; any other unknown key is a 400.
 */
const ignored = z.unknown().optional();
const DeploymentOptions = DeploymentBody.omit({ chatbot_id: true }).strict();
const AccessOptions = AccessBody.omit({ chatbot_id: true }).extend({ has_password: ignored }).strict();
const TelephonyOptions = TelephonyBody.omit({ chatbot_id: true })
  .extend({ has_auth_token: ignored, auth_token_last_four: ignored })
  .strict();
const ChatWorkspaceOptions = ChatWorkspaceBody.omit({ chatbot_id: true })
  .extend({ has_signing_secret: ignored, has_bot_token: ignored, bot_token_last_four: ignored })
  .strict();

export const ChatbotCreateBody = z
  .object({
    name: zString(1, 200),
    description: zString(0, 2000).optional().default(""),
    pipeline: PipelineRef.optional().openapi({ description: "Answer through this pipeline: `{id, input, output}`." }),
    pipeline_id: zId().optional().openapi({ description: "Alias of `pipeline.id`." }),
    knowledge_base_ids: zArray(zId(), 20).optional(),
    system_prompt: zString(0, 20_000).optional(),
    model: ModelName.optional().openapi({
      description: "`<connection>/<model>`; absent: the offline extractive answerer.",
    }),
    follow_up_questions: zInt(0, 5).optional().default(0),
    query_options: QueryOptions.optional(),
    browser_extension: zBool().optional().default(false),
    // The hosted SDK's `Chatbot.new` form: node names and option objects at the top level.
    input: zString(0, 100).optional().openapi({
      description:
        'The pipeline input that receives the message, by input name or input node id ("": not set). Same as `pipeline.input`.',
    }),
    output: zString(0, 100).optional().openapi({
      description:
        'The pipeline output that is the answer, by output name or output node id ("": not set). Same as `pipeline.output`.',
    }),
    deployment_options: zJsonObject(DeploymentOptions)
      .optional()
      .openapi({ description: "As /chatbots/update/deployment (without chatbot_id)." }),
    access_config: zJsonObject(AccessOptions)
      .optional()
      .openapi({ description: "As /chatbots/update/access (without chatbot_id)." }),
    twilio_config: zJsonObject(TelephonyOptions)
      .optional()
      .openapi({ description: "As /chatbots/update/telephony (without chatbot_id); auth_token: owner or admin only." }),
    slack_config: zJsonObject(ChatWorkspaceOptions).optional().openapi({
      description:
        "As /chatbots/update/chatworkspace (without chatbot_id); secrets and api_base_url: owner or admin only.",
    }),
    deployed: zBool().optional().openapi({ description: "true: deploy at once (as /chatbots/deploy)." }),
  })
  .openapi("Body_create_chatbot");
export type ChatbotCreateInput = z.output<typeof ChatbotCreateBody>;
