import { eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import type { ChatMessage } from "../../providers/types";
import type { MessageSource } from "../../durable-objects/conversation-object";
import { AppError } from "../../lib/errors";
import { database } from "../../db/client";
import { users } from "../../db/schema/identity";
import { resolveConnectionsOfKind } from "../connections/connections.service";
import { queryKnowledgeBase } from "../knowledge-bases/query.service";
import { QueryBody } from "../knowledge-bases/knowledge-bases.schemas";

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
export type AnswerEvent = { type: "text"; text: string } | { type: "done"; text: string; answeredBy: string; followUpQuestions: string[] };

export interface KnowledgeQuery {
  orgId: string;
  /** The chatbot's owner: knowledge bases are read with the owner's rights, visitors have none. */
  userId: string;
  knowledgeBaseIds: string[];
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
 * Everything a chatbot needs from the rest of Loom. Production wiring is below; tests pass their
 * own implementation to `registerChatbotRoutes`, through the same construction path.
 */
export interface ChatbotServices {
  answer(input: AnswerInput): AsyncIterable<AnswerEvent>;
  queryKnowledgeBases(query: KnowledgeQuery): Promise<MessageSource[]>;
  /** Runs a pipeline to completion and answers its outputs by name. */
  runPipeline(input: PipelineRunInput): Promise<Record<string, unknown>>;
  transcribe(input: { orgId: string; audio: Uint8Array; mimeType: string }): Promise<string>;
  /** Outbound calls to the chat workspace's web API. */
  fetch: typeof fetch;
}

export type ChatbotServicesFactory = (env: Env) => ChatbotServices;

/** The chatbot owner's rights, for work done on a visitor's or an integration's behalf. */
async function ownerAuth(env: Env, orgId: string, userId: string): Promise<AuthContext> {
  const rows = await database(env).select({ role: users.role, suspended: users.suspended, orgId: users.orgId }).from(users).where(eq(users.id, userId)).limit(1);
  const owner = rows[0];
  if (!owner || owner.suspended || owner.orgId !== orgId) throw new AppError("forbidden", "the chatbot's owner can no longer use it");
  return { userId, orgId, role: owner.role, via: "api_key" };
}

/** Every knowledge base's best passages, merged by score. */
async function queryKnowledge(env: Env, query: KnowledgeQuery): Promise<MessageSource[]> {
  if (query.knowledgeBaseIds.length === 0) return [];
  const auth = await ownerAuth(env, query.orgId, query.userId);
  const body = QueryBody.parse({ queries: [query.query], search_metadata: { top_k: query.topK }, config: query.scoreCutoff === null ? {} : { score_cutoff: query.scoreCutoff } });
  const results = await Promise.all(query.knowledgeBaseIds.map(async (kbId) => ({ kbId, result: await queryKnowledgeBase(env, auth, kbId, body) })));
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

/*
 * Production wiring. Knowledge bases are queried through the knowledge-base feature. The provider
 * layer (chat models, the extractive answerer, transcribers) and the pipeline runner are built on
 * other branches; until they are merged here those paths answer a clear 503 naming what is
 * missing, never invented output.
 */
const notInstalled = (what: string): AppError => new AppError("unavailable", `${what} is not installed on this server yet`);

export const productionChatbotServices: ChatbotServicesFactory = (env) => ({
  answer(): AsyncIterable<AnswerEvent> {
    throw notInstalled("built-in answering (the model provider layer)");
  },
  queryKnowledgeBases: (query) => queryKnowledge(env, query),
  async runPipeline() {
    throw notInstalled("the pipeline runner");
  },
  async transcribe({ orgId }) {
    const candidates = await resolveConnectionsOfKind(env, orgId, ["openai", "workers_ai"]);
    if (!candidates.some((connection) => connection.models.transcription)) {
      throw new AppError("bad_request", "this chatbot needs a speech-to-text connection: add a connection with a transcription model, or send text");
    }
    throw notInstalled("speech-to-text (the model provider layer)");
  },
  fetch: (input, init) => fetch(input, init),
});
