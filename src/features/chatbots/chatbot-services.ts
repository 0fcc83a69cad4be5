import { eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import type { ChatMessage } from "../../providers/types";
import type { MessageSource } from "../../durable-objects/conversation-object";
import { AppError, badRequest } from "../../lib/errors";
import type { FetchLike } from "../../lib/egress";
import { database } from "../../db/client";
import { users } from "../../db/schema/identity";
import { chatModelFor, transcriberFor, type ProviderDeps } from "../../providers/registry";
import { EXTRACTIVE_MODEL } from "../../providers/extractive";
import { streamGroundedAnswer, withoutUnknownCitations, type Passage } from "../../providers/grounded-answer";
import type { ChatModel, Transcriber } from "../../providers/types";
import { queryKnowledgeBase } from "../knowledge-bases/query.service";
import { QueryBody } from "../knowledge-bases/knowledge-bases.schemas";
import { runPipelineForUser } from "../pipelines/pipeline-runs.service";

export type { MessageSource };

export interface AnswerInput {
  orgId: string;
  /** `<connection>/<model>`; null means the offline extractive answerer. */
  model: string | null;
  systemPrompt: string;
  /** Earlier turns, already cut to the token budget, oldest first. */
  history: ChatMessage[];
  question: string;
  /** Knowledge-base passages retrieved for the question, best first. */
  sources: MessageSource[];
  /** Documents the user attached to the conversation. */
  attachments: { name: string; text: string }[];
  /** How many follow-up questions to suggest (0: none). */
  followUpQuestions: number;
  signal: AbortSignal;
}

/** Pieces of the answer as they are produced, then the whole. `answeredBy` labels the answerer (`loom/extractive`). */
export type AnswerEvent =
  | { type: "text"; text: string }
  | { type: "done"; text: string; answeredBy: string; followUpQuestions: string[] };

export interface KnowledgeQuery {
  orgId: string;
  /** The chatbot's owner: knowledge bases are read with the owner's rights, visitors have none. */
  userId: string;
  knowledgeBaseIds: string[];
  /** Per knowledge base id: a metadata filter in the knowledge-base query's `filter` language (a run's `filter`). */
  filters?: Record<string, Record<string, unknown>>;
  query: string;
  topK: number;
  scoreCutoff: number | null;
}

export interface PipelineRunInput {
  orgId: string;
  /** The chatbot's owner: visitors have no account, and the owner chose the pipeline. */
  userId: string;
  pipelineId: string;
  inputs: Record<string, unknown>;
  signal: AbortSignal;
}

/**
 * Everything a chatbot needs from the rest of Loom. Production wiring is below; the app takes it
 * from its `Deps` (src/deps.ts), where tests pass their own (`createApp({ chatbotServices })`).
 */
export interface ChatbotServices {
  answer(input: AnswerInput): AsyncIterable<AnswerEvent>;
  queryKnowledgeBases(query: KnowledgeQuery): Promise<MessageSource[]>;
  /** Runs a pipeline to completion and answers its outputs by name. */
  runPipeline(input: PipelineRunInput): Promise<Record<string, unknown>>;
  transcribe(input: { orgId: string; audio: Uint8Array; mimeType: string }): Promise<string>;
  /** Whether `transcribe` has a speech-to-text connection to use (the widget shows its microphone only then). */
  canTranscribe(orgId: string): Promise<boolean>;
  /**
   * The network under the egress checks, for replies to the chat workspace's web API. Production
   * leaves it unset (egressFetch uses the global fetch); tests record what would be sent.
   */
  fetch?: FetchLike;
}

export type ChatbotServicesFactory = (env: Env) => ChatbotServices;

/** The chatbot owner's rights, for work done on a visitor's or an integration's behalf. */
async function ownerAuth(env: Env, orgId: string, userId: string): Promise<AuthContext> {
  const rows = await database(env)
    .select({ role: users.role, suspended: users.suspended, orgId: users.orgId })
    .from(users)
    .where(eq(users.id, userId))
    .limit(1);
  const owner = rows[0];
  if (!owner || owner.suspended || owner.orgId !== orgId)
    throw new AppError("forbidden", "the chatbot's owner can no longer use it");
  return { userId, orgId, role: owner.role, via: "api_key" };
}

/** Every knowledge base's best passages, merged by score. */
async function queryKnowledge(env: Env, query: KnowledgeQuery): Promise<MessageSource[]> {
  if (query.knowledgeBaseIds.length === 0) return [];
  const auth = await ownerAuth(env, query.orgId, query.userId);
  const bodyFor = (kbId: string) => {
    const filter = query.filters?.[kbId];
    return QueryBody.parse({
      queries: [query.query],
      search_metadata: { top_k: query.topK, ...(filter ? { filter } : {}) },
      config: query.scoreCutoff === null ? {} : { score_cutoff: query.scoreCutoff },
    });
  };
  const results = await Promise.all(
    query.knowledgeBaseIds.map(async (kbId) => ({
      kbId,
      result: await queryKnowledgeBase(env, auth, kbId, bodyFor(kbId)),
    })),
  );
  return results
    .flatMap(({ kbId, result }) =>
      (result.chunks ?? []).map((item) => ({
        knowledgeBaseId: kbId,
        documentId: item.document_id,
        chunkId: item.id,
        name: typeof item.metadata.name === "string" ? item.metadata.name : null,
        score: item.score,
        text: item.text,
      })),
    )
    .sort((a, b) => b.score - a.score)
    .slice(0, query.topK);
}

const FOLLOW_UP_PROMPT =
  "Suggest short follow-up questions the user might ask next in this conversation. Answer with one question per line and nothing else.";

/** Follow-up questions from a generating model; the extractive answerer cannot invent any, so it suggests none. */
export async function followUpQuestions(
  model: ChatModel,
  question: string,
  answer: string,
  count: number,
  signal: AbortSignal,
): Promise<string[]> {
  if (count === 0 || model.model === EXTRACTIVE_MODEL || signal.aborted) return [];
  const result = await model.complete({
    messages: [
      { role: "system", content: `${FOLLOW_UP_PROMPT} Give exactly ${count}.` },
      { role: "user", content: `Question: ${question}\n\nAnswer: ${answer}` },
    ],
    maxTokens: 200,
    signal,
  });
  return result.text
    .split(/\r?\n/)
    .map((line) => line.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, "").trim())
    .filter((line) => line.length > 0 && line.length <= 300)
    .slice(0, count);
}

/**
 * The chatbot's grounded answer, streamed: its knowledge-base passages and attached documents as
 * numbered sources, its system prompt as instructions. No model: the offline extractive answerer,
 * which quotes the sources and is labelled `loom/extractive`.
 */
async function* answerWithModel(env: Env, providers: ProviderDeps, input: AnswerInput): AsyncIterable<AnswerEvent> {
  const model = await chatModelFor(env, { orgId: input.orgId }, input.model ?? EXTRACTIVE_MODEL, {
    ...providers,
    allowExtractive: input.model === null,
    purpose: "this chatbot",
  });
  const passages: Passage[] = [
    ...input.sources.map((s) => ({
      text: s.text,
      documentId: s.documentId,
      chunkId: s.chunkId,
      title: s.name ?? undefined,
    })),
    ...input.attachments.map((a) => ({ text: a.text, title: a.name })),
  ];
  let text = "";
  let answeredBy = model.model;
  for await (const event of streamGroundedAnswer({
    model,
    question: input.question,
    passages,
    history: input.history,
    instructions: input.systemPrompt || undefined,
    signal: input.signal,
  })) {
    // Attachments are numbered after the sources for the model, but only the sources are shown:
    // a marker past them (or one the model invented) would cite nothing the reader can see.
    if (event.type === "text") {
      const piece = withoutUnknownCitations(event.text, input.sources.length);
      text += piece;
      yield { ...event, text: piece };
    } else {
      text = withoutUnknownCitations(event.answer.text, input.sources.length);
      answeredBy = event.answer.model;
    }
  }
  yield {
    type: "done",
    text,
    answeredBy,
    followUpQuestions: await followUpQuestions(model, input.question, text, input.followUpQuestions, input.signal),
  };
}

async function transcribeAudio(
  env: Env,
  providers: ProviderDeps,
  orgId: string,
  audio: Uint8Array,
  mimeType: string,
): Promise<string> {
  let transcriber: Transcriber;
  try {
    transcriber = await transcriberFor(env, { orgId }, undefined, { ...providers, purpose: "this chatbot's audio" });
  } catch (error) {
    if (error instanceof AppError && error.code === "bad_request")
      throw badRequest(
        "this chatbot needs a speech-to-text connection: add a connection with a transcription model, or send text",
      );
    throw error;
  }
  return (await transcriber.transcribe(audio, mimeType)).text;
}

async function hasTranscriber(env: Env, providers: ProviderDeps, orgId: string): Promise<boolean> {
  try {
    await transcriberFor(env, { orgId }, undefined, { ...providers, purpose: "this chatbot's audio" });
    return true;
  } catch (error) {
    // No connection (or one this deployment cannot use) is a 400 from the registry: no microphone.
    if (error instanceof AppError && error.code === "bad_request") return false;
    throw error;
  }
}

/*
 * Production wiring: models and transcription through the provider layer (reached through
 * `providers`, the app's `Deps.providers`), knowledge bases through the knowledge-base feature,
 * pipelines through the pipelines feature (run with the chatbot owner's rights; aborting the
 * answer terminates the run).
 */
export function productionChatbotServices(env: Env, providers: ProviderDeps): ChatbotServices {
  return {
    answer: (input) => answerWithModel(env, providers, input),
    queryKnowledgeBases: (query) => queryKnowledge(env, query),
    runPipeline: (input) =>
      runPipelineForUser(env, {
        orgId: input.orgId,
        userId: input.userId,
        pipelineId: input.pipelineId,
        inputs: input.inputs,
        signal: input.signal,
      }),
    transcribe: ({ orgId, audio, mimeType }) => transcribeAudio(env, providers, orgId, audio, mimeType),
    canTranscribe: (orgId) => hasTranscriber(env, providers, orgId),
    fetch: providers.fetch,
  };
}
