import type { chatbots } from "../../db/schema/chatbots";
import type { Role } from "../../env";
import { ownedRecordFields } from "../../lib/ownership";

/** Messages per visitor per minute when the access settings name none. */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 20;

export type ChatbotRow = typeof chatbots.$inferSelect;

export interface DeploymentSettings {
  display_name?: string;
  greeting?: string;
  primary_color?: string;
  secondary_color?: string;
  avatar_url?: string;
  suggested_questions?: string[];
  show_sources?: boolean;
  position?: "left" | "right";
  /** Visitors may attach documents (`/chatbots/upload`); unset means yes, as before the setting existed. */
  allow_uploads?: boolean;
  /** Visitors may send recorded audio, transcribed by the organization's speech-to-text connection; unset means yes. */
  speech_to_text?: boolean;
}

/** Knowledge-base query options of a chatbot (`query_options`). */
export interface ChatbotQueryOptions {
  top_k?: number;
  score_cutoff?: number;
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

/**
 * A chatbot as its organization sees it. Secrets are write-only: only whether they are set and
 * their last four. Loom's own fields (camelCase settings) and the hosted SDK's (`pipeline.object_id`,
 * `deployment_options`, `access_config`, `twilio_config`, `slack_config`, `input`, `output`, which
 * `Chatbot.fetch` reads) are both present, so old clients and the SDK read the same record.
 */
export function chatbotRecord(row: ChatbotRow) {
  const access = row.access;
  const telephony = row.telephony;
  const workspace = row.chatworkspace;
  return {
    ...ownedRecordFields(row),
    // Always an object: the SDK's `Chatbot.fetch` reads `pipeline.object_id` of every chatbot, and
    // one answering through knowledge bases has no pipeline (its ids are null, not the object).
    pipeline: { id: row.pipelineId, object_id: row.pipelineId, input: row.pipelineInput, output: row.pipelineOutput },
    input: row.pipelineInput,
    output: row.pipelineOutput,
    knowledgeBaseIds: row.knowledgeBaseIds,
    queryOptions: row.queryOptions,
    systemPrompt: row.systemPrompt,
    model: row.model,
    followUpQuestions: row.followUpQuestions,
    browserExtension: row.browserExtension,
    deployed: row.deployed,
    deployedAt: row.deployedAt,
    deployment: row.deployment,
    access: {
      mode: access.mode ?? "public",
      hasPassword: Boolean(access.password_hash),
      allowedOrigins: access.allowed_origins ?? [],
      rateLimitPerMinute: access.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    },
    rbac: row.rbac,
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
    ...sdkSettings(row, access, telephony, workspace),
  };
}

/** The settings under the hosted SDK's names, in the snake_case keys `Chatbot.new` accepts back. */
function sdkSettings(
  row: ChatbotRow,
  access: AccessSettings,
  telephony: TelephonySettings,
  workspace: ChatWorkspaceSettings,
) {
  return {
    deployment_options: { ...row.deployment, browser_extension: row.browserExtension },
    access_config: {
      mode: access.mode ?? "public",
      has_password: Boolean(access.password_hash),
      allowed_origins: access.allowed_origins ?? [],
      rate_limit_per_minute: access.rate_limit_per_minute ?? DEFAULT_RATE_LIMIT_PER_MINUTE,
    },
    twilio_config: {
      account_sid: telephony.account_sid ?? null,
      phone_number: telephony.phone_number ?? null,
      enabled: telephony.enabled ?? false,
      has_auth_token: row.telephonyTokenSealed !== null,
      auth_token_last_four: telephony.auth_token_last_four ?? null,
    },
    slack_config: {
      team_id: workspace.team_id ?? null,
      api_base_url: workspace.api_base_url ?? null,
      enabled: workspace.enabled ?? false,
      has_signing_secret: row.chatworkspaceSigningSealed !== null,
      has_bot_token: row.chatworkspaceTokenSealed !== null,
      bot_token_last_four: workspace.bot_token_last_four ?? null,
    },
  };
}
