import type { AuthContext, Env } from "../../env";
import { AppError, badRequest } from "../../lib/errors";
import { hasRole } from "../../middleware/auth";
import { encryptSecret, hashPassword } from "../../lib/crypto";
import { requireSecret } from "../../lib/config";
import {
  assertCanEdit,
  assertOrgUsers,
  getVisibleChatbot,
  saveChatbot,
  type ChatbotRow,
  type ChatWorkspaceSettings,
  type DeploymentSettings,
  type RbacSettings,
  type TelephonySettings,
} from "./chatbots.service";
import type { AccessInput, ChatWorkspaceInput, DeploymentInput, RbacInput, TelephonyInput } from "./chatbots.schemas";

async function editable(env: Env, auth: AuthContext, chatbotId: string): Promise<ChatbotRow> {
  const row = await getVisibleChatbot(env, auth, chatbotId);
  assertCanEdit(row, auth);
  return row;
}

/**
 * Where an integration sends its secrets, and the secrets themselves, are the organization's
 * owner's or admins' to set, like connections: an editor could otherwise point the bot token at a
 * server of their own, or swap the signing secret and forge the integration's requests.
 */
function assertMayChangeIntegration(auth: AuthContext, fields: Record<string, unknown>): void {
  const sensitive = Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([key]) => key);
  if (sensitive.length > 0 && !hasRole(auth, "admin"))
    throw new AppError("forbidden", `only an owner or admin of the organization can change ${sensitive.join(", ")}`);
}

function definedFields<T extends object>(input: T, skip: string[]): string[] {
  return Object.entries(input)
    .filter(([key, value]) => value !== undefined && !skip.includes(key))
    .map(([key]) => key);
}

/** The settings routes' inputs without the chatbot they name: what `Chatbot.new`'s option objects carry. */
type Settings<T> = Omit<T, "chatbot_id">;

function mergedDeployment(row: ChatbotRow, input: Settings<DeploymentInput>): DeploymentSettings {
  const current = row.deployment;
  // chatbot_id (on the settings routes) names the chatbot; it is not a setting.
  const { browser_extension: _ext, ...settings } = { ...input, chatbot_id: undefined };
  const next: DeploymentSettings = { ...current };
  for (const [key, value] of Object.entries(settings))
    if (value !== undefined) (next as Record<string, unknown>)[key] = value;
  return next;
}

export async function deploy(env: Env, auth: AuthContext, input: DeploymentInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  const changes: Partial<ChatbotRow> = {
    deployed: true,
    deployedAt: row.deployed ? row.deployedAt : new Date().toISOString(),
    deployment: mergedDeployment(row, input),
  };
  if (input.browser_extension !== undefined) changes.browserExtension = input.browser_extension;
  return saveChatbot(env, auth, row, changes, "chatbot.deploy", definedFields(input, ["chatbot_id"]));
}

export async function undeploy(env: Env, auth: AuthContext, chatbotId: string): Promise<ChatbotRow> {
  const row = await editable(env, auth, chatbotId);
  return saveChatbot(env, auth, row, { deployed: false, deployedAt: null }, "chatbot.undeploy", []);
}

export function deploymentChanges(row: ChatbotRow, input: Settings<DeploymentInput>): Partial<ChatbotRow> {
  const changes: Partial<ChatbotRow> = { deployment: mergedDeployment(row, input) };
  if (input.browser_extension !== undefined) changes.browserExtension = input.browser_extension;
  return changes;
}

export async function updateDeployment(env: Env, auth: AuthContext, input: DeploymentInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  const changes = deploymentChanges(row, input);
  return saveChatbot(env, auth, row, changes, "chatbot.update_deployment", definedFields(input, ["chatbot_id"]));
}

export async function updateAccess(env: Env, auth: AuthContext, input: AccessInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  // The password never appears in the audit log, only that it changed.
  return saveChatbot(
    env,
    auth,
    row,
    await accessChanges(row, input),
    "chatbot.update_access",
    definedFields(input, ["chatbot_id"]),
  );
}

export async function accessChanges(row: ChatbotRow, input: Settings<AccessInput>): Promise<Partial<ChatbotRow>> {
  const next = { ...row.access };
  if (input.mode) next.mode = input.mode;
  if (input.password) next.password_hash = await hashPassword(input.password);
  if (input.allowed_origins) next.allowed_origins = input.allowed_origins.map((origin) => origin.replace(/\/$/, ""));
  if (input.rate_limit_per_minute) next.rate_limit_per_minute = input.rate_limit_per_minute;
  if (next.mode === "password" && !next.password_hash) throw badRequest("password: is required when mode is password");
  return { access: next };
}

export async function updateRbac(env: Env, auth: AuthContext, input: RbacInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  await assertOrgUsers(env, auth, input.editors ?? [], "editors");
  await assertOrgUsers(env, auth, input.runners ?? [], "runners");
  const next: RbacSettings = { ...row.rbac };
  if (input.editors) next.editors = [...new Set(input.editors)];
  if (input.editor_roles) next.editor_roles = [...new Set(input.editor_roles)];
  if (input.runners) next.runners = [...new Set(input.runners)];
  if (input.runner_roles) next.runner_roles = [...new Set(input.runner_roles)];
  return saveChatbot(env, auth, row, { rbac: next }, "chatbot.update_rbac", definedFields(input, ["chatbot_id"]));
}

async function seal(env: Env, secret: string): Promise<string> {
  return encryptSecret(secret, requireSecret(env, "ENCRYPTION_KEY"));
}

export async function updateTelephony(env: Env, auth: AuthContext, input: TelephonyInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  return saveChatbot(
    env,
    auth,
    row,
    await telephonyChanges(env, auth, row, input),
    "chatbot.update_telephony",
    definedFields(input, ["chatbot_id"]),
  );
}

export async function telephonyChanges(
  env: Env,
  auth: AuthContext,
  row: ChatbotRow,
  input: Settings<TelephonyInput>,
): Promise<Partial<ChatbotRow>> {
  assertMayChangeIntegration(auth, { auth_token: input.auth_token });
  const next: TelephonySettings = { ...row.telephony };
  if (input.account_sid) next.account_sid = input.account_sid;
  if (input.phone_number) next.phone_number = input.phone_number;
  if (input.enabled !== undefined) next.enabled = input.enabled;
  const changes: Partial<ChatbotRow> = {};
  if (input.auth_token) {
    changes.telephonyTokenSealed = await seal(env, input.auth_token);
    next.auth_token_last_four = input.auth_token.slice(-4);
  }
  if (next.enabled && !(changes.telephonyTokenSealed ?? row.telephonyTokenSealed))
    throw badRequest("auth_token: is required to enable the telephony integration");
  changes.telephony = next;
  return changes;
}

export async function updateChatWorkspace(env: Env, auth: AuthContext, input: ChatWorkspaceInput): Promise<ChatbotRow> {
  const row = await editable(env, auth, input.chatbot_id);
  return saveChatbot(
    env,
    auth,
    row,
    await chatWorkspaceChanges(env, auth, row, input),
    "chatbot.update_chatworkspace",
    definedFields(input, ["chatbot_id"]),
  );
}

export async function chatWorkspaceChanges(
  env: Env,
  auth: AuthContext,
  row: ChatbotRow,
  input: Settings<ChatWorkspaceInput>,
): Promise<Partial<ChatbotRow>> {
  assertMayChangeIntegration(auth, {
    api_base_url: input.api_base_url,
    signing_secret: input.signing_secret,
    bot_token: input.bot_token,
  });
  const next: ChatWorkspaceSettings = { ...row.chatworkspace };
  if (input.team_id) next.team_id = input.team_id;
  if (input.api_base_url) next.api_base_url = input.api_base_url.replace(/\/$/, "");
  if (input.enabled !== undefined) next.enabled = input.enabled;
  const changes: Partial<ChatbotRow> = {};
  if (input.signing_secret) changes.chatworkspaceSigningSealed = await seal(env, input.signing_secret);
  if (input.bot_token) {
    changes.chatworkspaceTokenSealed = await seal(env, input.bot_token);
    next.bot_token_last_four = input.bot_token.slice(-4);
  }
  if (next.enabled && !(changes.chatworkspaceSigningSealed ?? row.chatworkspaceSigningSealed))
    throw badRequest("signing_secret: is required to enable the chat workspace integration");
  if (next.enabled && !(changes.chatworkspaceTokenSealed ?? row.chatworkspaceTokenSealed))
    throw badRequest("bot_token: is required to enable the chat workspace integration");
  changes.chatworkspace = next;
  return changes;
}

/** Whether visitors may attach documents and send audio: both on unless the owner switched them off. */
export function visitorInputs(row: ChatbotRow): { uploads: boolean; speech: boolean } {
  const deployment = row.deployment;
  return { uploads: deployment.allow_uploads !== false, speech: deployment.speech_to_text !== false };
}

/**
 * What anyone may see of a deployed chatbot: its presentation and how to get in. Built field by
 * field from an allow-list so nothing private (prompt, model, knowledge bases, owner, secrets) leaks.
 * `canTranscribe`: whether the organization has a speech-to-text connection, so the microphone
 * shows only where audio can be answered.
 */
export function publicProfile(row: ChatbotRow, canTranscribe: boolean) {
  const deployment = row.deployment;
  const access = row.access;
  return {
    _id: row.id,
    name: deployment.display_name ?? row.name,
    description: row.description,
    greeting: deployment.greeting ?? null,
    primaryColor: deployment.primary_color ?? null,
    secondaryColor: deployment.secondary_color ?? null,
    avatarUrl: deployment.avatar_url ?? null,
    suggestedQuestions: deployment.suggested_questions ?? [],
    showSources: deployment.show_sources ?? false,
    position: deployment.position ?? "right",
    access: { mode: access.mode ?? "public" },
    followUpQuestions: row.followUpQuestions > 0,
    allowUploads: visitorInputs(row).uploads,
    speechToText: visitorInputs(row).speech && canTranscribe,
  };
}
