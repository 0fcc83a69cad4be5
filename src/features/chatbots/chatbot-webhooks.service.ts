import { eq, lt } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { chatbots, chatbotWebhookReplays } from "../../db/schema/chatbots";
import { AppError, badRequest, notFound } from "../../lib/errors";
import { decryptSecret } from "../../lib/crypto";
import { requireSecret } from "../../lib/config";
import { tryParseJson } from "../../lib/body";
import { egressFetch } from "../../lib/egress";
import { DEFAULT_WORKSPACE_API, WORKSPACE_API_HOSTS } from "./chatbots.schemas";
import type { ChatbotServices } from "./chatbot-services";
import type { ChatbotRow } from "./chatbots.service";
import { executeRun, prepareRun } from "./chatbot-run";
import { conversationNameFrom } from "./history-budget";
import { createConversation, findChannelConversation } from "./conversations.service";
import { checkWorkspaceRequest, escapeXml, verifyTelephonySignature } from "./webhook-signatures";
import { causeChain, log } from "../../lib/log";

/** A reply's answer is a few bytes of JSON; anything past this is not the workspace API. */
const MAX_WORKSPACE_REPLY_BYTES = 64 * 1024;
const WORKSPACE_TIMEOUT_MS = 10_000;
/** Processed webhook requests are remembered this long to refuse replays. */
const REPLAY_MEMORY_SECONDS = 2 * 24 * 60 * 60;

const refused = (message: string): AppError => new AppError("unauthorized", message);

async function chatbotById(env: Env, chatbotId: string): Promise<ChatbotRow> {
  const rows = await database(env).select().from(chatbots).where(eq(chatbots.id, chatbotId)).limit(1);
  if (!rows[0]) throw notFound("chatbot");
  return rows[0];
}

/** Records a processed request; false when it was seen before (a replay). */
async function firstDelivery(env: Env, key: string): Promise<boolean> {
  const now = Math.floor(Date.now() / 1000);
  const db = database(env);
  const [, inserted] = await db.batch([
    db.delete(chatbotWebhookReplays).where(lt(chatbotWebhookReplays.createdAt, now - REPLAY_MEMORY_SECONDS)),
    db
      .insert(chatbotWebhookReplays)
      .values({ key, createdAt: now })
      .onConflictDoNothing()
      .returning({ key: chatbotWebhookReplays.key }),
  ]);
  return inserted.length === 1;
}

/** The integration caller's conversation, created on their first message (concurrent first messages share one). */
async function channelConversationId(
  env: Env,
  chatbot: ChatbotRow,
  channel: "telephony" | "chatworkspace",
  key: string,
  text: string,
): Promise<string> {
  const existing = await findChannelConversation(env, chatbot, channel, key);
  if (existing) return existing.id;
  try {
    return (await createConversation(env, chatbot, { kind: "channel", channel, key }, conversationNameFrom(text))).id;
  } catch (error) {
    const again = await findChannelConversation(env, chatbot, channel, key);
    if (again) return again.id;
    throw error;
  }
}

async function answerOnChannel(
  env: Env,
  services: ChatbotServices,
  chatbot: ChatbotRow,
  channel: "telephony" | "chatworkspace",
  key: string,
  text: string,
): Promise<string> {
  const conversationId = await channelConversationId(env, chatbot, channel, key, text);
  const prepared = await prepareRun(
    env,
    services,
    chatbot,
    { kind: "channel", channel, key },
    { text, conversation_id: conversationId, stream: false },
    false,
  );
  const result = await executeRun(env, services, prepared, () => undefined);
  if (result.failure) throw result.failure;
  return result.output_message;
}

const xml = (body: string): string => `<?xml version="1.0" encoding="UTF-8"?><Response>${body}</Response>`;

/**
 * Telephony webhook: verifies the provider's signature over the URL and sorted form parameters,
 * refuses replays, answers the caller's text (an SMS `Body` or a call's `SpeechResult`) and
 * replies in the provider's XML (`Message` for SMS, `Say` then `Gather` for calls).
 */
export async function handleTelephonyWebhook(
  env: Env,
  services: ChatbotServices,
  chatbotId: string,
  url: string,
  rawBody: string,
  signature: string | undefined,
): Promise<string> {
  const chatbot = await chatbotById(env, chatbotId);
  const settings = chatbot.telephony;
  if (!settings.enabled || !chatbot.telephonyTokenSealed) throw notFound("chatbot");
  if (!signature) throw refused("missing request signature");
  const params = [...new URLSearchParams(rawBody).entries()];
  const authToken = await decryptSecret(chatbot.telephonyTokenSealed, requireSecret(env, "ENCRYPTION_KEY"));
  if (!(await verifyTelephonySignature(authToken, url, params, signature))) throw refused("invalid request signature");
  if (!(await firstDelivery(env, `telephony:${chatbotId}:${signature}`)))
    throw new AppError("conflict", "this request was already processed");

  const form = new Map(params);
  const from = form.get("From");
  if (!from) throw badRequest("From: is required");
  const isCall = form.has("CallSid") && !form.has("MessageSid");
  const text = (form.get("Body") ?? form.get("SpeechResult") ?? "").trim();
  const gather = `<Gather input="speech" action="${escapeXml(url)}" method="POST"/>`;
  if (text === "") {
    const greeting = chatbot.deployment.greeting ?? "Hello. How can I help?";
    return xml(isCall ? `<Say>${escapeXml(greeting)}</Say>${gather}` : `<Message>${escapeXml(greeting)}</Message>`);
  }
  let answer: string;
  try {
    answer = await answerOnChannel(env, services, chatbot, "telephony", from, text);
  } catch (error) {
    log(env.LOG_LEVEL, "error", "chatbot_telephony_failed", { chatbot_id: chatbotId, cause: causeChain(error) });
    answer = "Sorry, I could not answer that right now.";
  }
  return xml(isCall ? `<Say>${escapeXml(answer)}</Say>${gather}` : `<Message>${escapeXml(answer)}</Message>`);
}

interface WorkspaceEvent {
  type?: string;
  text?: string;
  user?: string;
  bot_id?: string;
  subtype?: string;
  channel?: string;
  ts?: string;
  thread_ts?: string;
}

/**
 * Chat workspace webhook: verifies the signed, timestamped request, answers the URL verification
 * challenge, refuses replayed events, acknowledges at once and posts the answer through the
 * workspace's web API in the background (the workspace wants an answer within seconds).
 */
export async function handleWorkspaceWebhook(
  env: Env,
  services: ChatbotServices,
  chatbotId: string,
  rawBody: string,
  timestamp: string | undefined,
  signature: string | undefined,
  keepAlive: (work: Promise<unknown>) => void,
): Promise<{ challenge: string } | { ok: true; ignored?: boolean }> {
  const chatbot = await chatbotById(env, chatbotId);
  const settings = chatbot.chatworkspace;
  if (!settings.enabled || !chatbot.chatworkspaceSigningSealed || !chatbot.chatworkspaceTokenSealed)
    throw notFound("chatbot");
  const key = requireSecret(env, "ENCRYPTION_KEY");
  const signingSecret = await decryptSecret(chatbot.chatworkspaceSigningSealed, key);
  const check = await checkWorkspaceRequest(
    signingSecret,
    timestamp,
    signature,
    rawBody,
    Math.floor(Date.now() / 1000),
  );
  if (check === "unsigned") throw refused("missing request signature or timestamp");
  if (check === "stale") throw refused("stale request timestamp");
  if (check === "invalid") throw refused("invalid request signature");

  const payload = tryParseJson(rawBody);
  if (!payload || typeof payload !== "object" || Array.isArray(payload))
    throw badRequest("request body is not a JSON object");
  const body = payload as {
    type?: string;
    challenge?: string;
    event_id?: string;
    team_id?: string;
    event?: WorkspaceEvent;
  };
  if (body.type === "url_verification") {
    if (typeof body.challenge !== "string") throw badRequest("challenge: is required");
    return { challenge: body.challenge };
  }
  if (body.type !== "event_callback" || !body.event) return { ok: true, ignored: true };
  if (settings.team_id && body.team_id && body.team_id !== settings.team_id)
    throw refused("request from another workspace");
  const eventId = body.event_id ?? `${body.event.channel}:${body.event.ts}`;
  if (!(await firstDelivery(env, `chatworkspace:${chatbotId}:${eventId}`)))
    throw new AppError("conflict", "this event was already processed");
  const event = body.event;
  // The bot's own messages come back as events too: answering them would loop forever.
  if (
    (event.type !== "message" && event.type !== "app_mention") ||
    event.bot_id ||
    event.subtype ||
    !event.channel ||
    !event.text?.trim()
  )
    return { ok: true, ignored: true };

  const channel = event.channel;
  const text = event.text.replace(/<@[A-Z0-9]+>/g, "").trim() || event.text.trim();
  const botToken = await decryptSecret(chatbot.chatworkspaceTokenSealed, key);
  const apiBase = settings.api_base_url ?? DEFAULT_WORKSPACE_API;
  keepAlive(
    (async () => {
      let reply: string;
      try {
        reply = await answerOnChannel(
          env,
          services,
          chatbot,
          "chatworkspace",
          `${body.team_id ?? "-"}:${channel}`,
          text,
        );
      } catch (error) {
        log(env.LOG_LEVEL, "error", "chatbot_chatworkspace_failed", {
          chatbot_id: chatbotId,
          cause: causeChain(error),
        });
        reply = "Sorry, I could not answer that right now.";
      }
      // Checked again here, not only when saved: a stored URL from before the allow-list must not get the token.
      const response = await egressFetch(
        `${apiBase}/chat.postMessage`,
        {
          method: "POST",
          headers: { "content-type": "application/json; charset=utf-8", authorization: `Bearer ${botToken}` },
          body: JSON.stringify({ channel, text: reply, thread_ts: event.thread_ts ?? event.ts }),
        },
        {
          rules: { allowHosts: WORKSPACE_API_HOSTS },
          maxBytes: MAX_WORKSPACE_REPLY_BYTES,
          timeoutMs: WORKSPACE_TIMEOUT_MS,
          fetch: services.fetch,
        },
      );
      await response.body?.cancel();
      if (!response.ok)
        log(env.LOG_LEVEL, "warn", "chatbot_chatworkspace_post_failed", {
          chatbot_id: chatbotId,
          status: response.status,
        });
    })().catch((error: unknown) =>
      log(env.LOG_LEVEL, "warn", "chatbot_chatworkspace_post_failed", {
        chatbot_id: chatbotId,
        cause: causeChain(error),
      }),
    ),
  );
  return { ok: true };
}
