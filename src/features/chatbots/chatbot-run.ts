import type { Env } from "../../env";
import type { BeginResult, MessageSource } from "../../durable-objects/conversation-object";
import { AppError, badRequest } from "../../lib/errors";
import { decodeClientBase64 } from "../../lib/base64";
import type { ChatbotServices } from "./chatbot-services";
import type { ChatbotRow } from "./chatbots.service";
import { conversationNameFrom } from "./history-budget";
import {
  conversationStub,
  createConversation,
  findConversation,
  recordTurn,
  type ConversationActor,
  type ConversationRow,
} from "./conversations.service";
import type { RunInput } from "./chatbots.schemas";
import { knowledgeScope, type KnowledgeScope } from "./chatbot-filter";
import { causeChain, logEvent } from "../../lib/log";

/** Tokens of earlier messages given to the model with each turn. */
export const HISTORY_TOKEN_BUDGET = 3000;
/** A turn holds its conversation at most this long; then the next message proceeds. */
export const TURN_TIMEOUT_MS = 120_000;
const MAX_AUDIO_BYTES = 10 * 1024 * 1024;
/** How often a generating turn asks its conversation whether it was terminated. */
const TERMINATE_POLL_MS = 300;

/** Why a message got no answer, by the reason its conversation gave. */
const NOT_ANSWERED: Record<"terminated" | "interrupted" | "deleted", string> = {
  terminated: "the conversation was terminated before this message was answered",
  interrupted: "the conversation was interrupted",
  deleted: "the conversation was deleted before this message was answered",
};

export interface PreparedRun {
  chatbot: ChatbotRow;
  conversation: ConversationRow;
  text: string;
  showSources: boolean;
  /** The run's `filter`, when given: which knowledge bases and documents this message searches. */
  scope?: KnowledgeScope;
}

export interface RunResult {
  status: "success" | "failed";
  conversation_id: string;
  message_id: string | null;
  output_message: string;
  follow_up_questions: string[];
  answered_by: string | null;
  sources?: MessageSource[];
  error?: string;
  /** The failure as an AppError, for non-streaming callers to rethrow with its status. */
  failure?: AppError;
}

function decodeAudio(input: RunInput): { bytes: Uint8Array; mimeType: string } {
  const audio = input.audio;
  if (audio === undefined) throw badRequest("text or audio is required");
  const base64 = typeof audio === "string" ? audio : audio.raw_bytes;
  const bytes = decodeClientBase64(base64, "audio", MAX_AUDIO_BYTES);
  if (bytes.length === 0) throw badRequest("audio: is empty");
  const mimeType =
    input.audio_mime_type ?? (typeof audio === "string" ? "audio/mpeg" : audio.metadata.mime_type || "audio/mpeg");
  return { bytes, mimeType };
}

/**
 * Everything that can fail with a plain HTTP error happens here, before any event is streamed:
 * the input, the transcription and the conversation lookup.
 */
export async function prepareRun(
  env: Env,
  services: ChatbotServices,
  chatbot: ChatbotRow,
  actor: ConversationActor,
  input: RunInput,
  showSources: boolean,
): Promise<PreparedRun> {
  if (input.text !== undefined && input.audio !== undefined) throw badRequest("give text or audio, not both");
  let text = input.text?.trim() ?? "";
  if (input.text !== undefined && text === "") throw badRequest("text: must not be blank");
  // A filter narrows the chatbot's own knowledge-base search; a pipeline takes no filter, so one is refused rather than ignored.
  if (input.filter !== undefined && chatbot.pipelineId)
    throw badRequest(
      "filter: narrows a knowledge-base chatbot's search; this chatbot answers through a pipeline, which takes no filter",
    );
  const scope = input.filter !== undefined ? knowledgeScope(chatbot.knowledgeBaseIds, input.filter) : undefined;
  const existing = input.conversation_id ? await findConversation(env, chatbot, actor, input.conversation_id) : null;
  if (input.text === undefined) {
    const audio = decodeAudio(input);
    text = (await services.transcribe({ orgId: chatbot.orgId, audio: audio.bytes, mimeType: audio.mimeType })).trim();
    if (text === "") throw badRequest("audio: no speech was recognised");
  }
  const conversation = existing ?? (await createConversation(env, chatbot, actor, conversationNameFrom(text)));
  return { chatbot, conversation, text, showSources, scope };
}

function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  logEvent("error", "chatbot_answer_failed", { cause: causeChain(error) });
  return new AppError("internal", "the chatbot failed to answer");
}

function outputText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined || value === null) return "";
  return JSON.stringify(value);
}

/**
 * Answers one message in its conversation's turn order, calling `onPiece` with each new piece of
 * text as it is produced. Failures after the message is stored are recorded with it and returned
 * (never thrown), so a streaming caller can still send its final event.
 */
export async function executeRun(
  env: Env,
  services: ChatbotServices,
  run: PreparedRun,
  onPiece: (text: string) => void | Promise<void>,
): Promise<RunResult> {
  const { chatbot, conversation } = run;
  const stub = conversationStub(env, conversation.id);
  const turn: BeginResult = await stub.begin({
    text: run.text,
    historyBudget: HISTORY_TOKEN_BUDGET,
    turnTimeoutMs: TURN_TIMEOUT_MS,
  });
  const base = { conversation_id: conversation.id, follow_up_questions: [] as string[], answered_by: null };
  if (!turn.ok) {
    await recordTurn(env, conversation.id);
    const failure = new AppError("conflict", NOT_ANSWERED[turn.reason]);
    return { ...base, status: "failed", message_id: null, output_message: "", error: failure.message, failure };
  }

  const controller = new AbortController();
  let lastPoll = Date.now();
  let text = "";
  let sources: MessageSource[] = [];
  let answeredBy: string | null = null;
  let followUps: string[] = [];
  try {
    if (chatbot.pipelineId) {
      const inputName = chatbot.pipelineInput ?? "query";
      const outputs = await services.runPipeline({
        orgId: chatbot.orgId,
        userId: chatbot.ownerId,
        pipelineId: chatbot.pipelineId,
        inputs: { [inputName]: run.text },
        signal: controller.signal,
      });
      const outputName = chatbot.pipelineOutput ?? Object.keys(outputs)[0];
      if (outputName === undefined || !(outputName in outputs))
        throw new AppError("bad_request", `the pipeline gave no output named '${chatbot.pipelineOutput ?? "(any)"}'`);
      text = outputText(outputs[outputName]);
      answeredBy = `pipeline/${chatbot.pipelineId}`;
      if (text) await onPiece(text);
    } else {
      const options = chatbot.queryOptions;
      sources = await services.queryKnowledgeBases({
        orgId: chatbot.orgId,
        userId: chatbot.ownerId,
        knowledgeBaseIds: run.scope?.knowledgeBaseIds ?? chatbot.knowledgeBaseIds,
        filters: run.scope?.filters,
        query: run.text,
        topK: options.top_k ?? 5,
        scoreCutoff: options.score_cutoff ?? null,
      });
      const events = services.answer({
        orgId: chatbot.orgId,
        model: chatbot.model,
        systemPrompt: chatbot.systemPrompt,
        history: turn.history,
        question: run.text,
        sources,
        attachments: turn.attachments,
        followUpQuestions: chatbot.followUpQuestions,
        signal: controller.signal,
      });
      for await (const event of events) {
        if (event.type === "text") {
          text += event.text;
          if (event.text) await onPiece(event.text);
        } else {
          text = event.text;
          answeredBy = event.answeredBy;
          followUps = event.followUpQuestions.slice(0, chatbot.followUpQuestions);
        }
        if (Date.now() - lastPoll >= TERMINATE_POLL_MS) {
          lastPoll = Date.now();
          if (!(await stub.proceed(turn.turnId))) {
            controller.abort();
            break;
          }
        }
      }
    }
  } catch (error) {
    const failure = toAppError(error);
    const stored = await stub.complete(turn.turnId, {
      content: text,
      status: "failed",
      sources,
      followUpQuestions: [],
      answeredBy,
      error: failure.message,
    });
    await recordTurn(env, conversation.id);
    return {
      ...base,
      status: "failed",
      message_id: stored.messageId,
      output_message: text,
      error: failure.message,
      failure,
    };
  }
  const aborted = controller.signal.aborted;
  const stored = await stub.complete(turn.turnId, {
    content: text,
    status: aborted ? "terminated" : "complete",
    sources,
    followUpQuestions: followUps,
    answeredBy,
    error: aborted ? "terminated" : null,
  });
  if (!stored.ok && stored.reason === "deleted") {
    const failure = new AppError("conflict", "the conversation was deleted while this message was being answered");
    return { ...base, status: "failed", message_id: null, output_message: text, error: failure.message, failure };
  }
  // A termination that arrived after the last poll still ends the turn as terminated.
  const terminated = aborted || (stored.ok && stored.status === "terminated");
  await recordTurn(env, conversation.id);
  return {
    status: "success",
    conversation_id: conversation.id,
    message_id: stored.messageId,
    output_message: text,
    follow_up_questions: followUps,
    answered_by: answeredBy,
    ...(run.showSources ? { sources } : {}),
    ...(terminated ? { error: "terminated" } : {}),
  };
}

/** The final server-sent event and the non-streaming body share one shape. */
export function publicResult(
  result: RunResult,
  extra: Record<string, unknown> = {},
): Omit<RunResult, "failure"> & Record<string, unknown> {
  const { failure: _failure, ...rest } = result;
  return { ...rest, ...extra };
}
