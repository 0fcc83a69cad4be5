import type { z } from "@hono/zod-openapi";
import type { AuthContext, Env } from "../../env";
import { AppError } from "../../lib/errors";
import type { ChatMessage } from "../../providers/types";
import { and, eq } from "drizzle-orm";
import { database } from "../../db/client";
import { connections } from "../../db/schema/identity";
import { EXTRACTIVE_MODEL } from "../../providers/extractive";
import { chatModelFor, type ProviderDeps } from "../../providers/registry";
import { queryWithModelOptions } from "../knowledge-bases/options/knowledge-base-query";
import { visibleKnowledgeBase } from "../knowledge-bases/knowledge-bases.service";
import { QueryBody } from "../knowledge-bases/knowledge-bases.schemas";
import type { QueryResult } from "../knowledge-bases/query.service";
import { getTransformation, runTransformation } from "../transformations/transformations.service";
import { NodeFailure } from "./node-failure";
import { runChildPipeline } from "./pipeline-runs.service";

/**
 * What node executors need from the rest of Loom. Executors call only this interface, so a
 * run can be tested with in-test implementations and the production wiring lives in one place
 * (`productionNodeServices` below). Each method takes the run's AuthContext: a run acts with
 * the rights of whoever started it.
 */
export interface KnowledgeBaseQueryOptions {
  search_metadata?: Record<string, unknown>;
  config?: Record<string, unknown>;
}

export interface KnowledgeBaseQueryResult {
  /** Context text for a model (the formatted text, else the chunk texts joined). */
  text: string;
  /** The result items, best first. */
  results: unknown[];
  /** The answer, when the query asked for advanced QA. */
  response?: string;
}

export interface NodeChatRequest {
  model?: string;
  connectionId?: string;
  messages: ChatMessage[];
  temperature?: number;
  maxTokens?: number;
  signal: AbortSignal;
}

export interface SubPipelineRequest {
  /** The child run's id, chosen and persisted by the parent before the call, so a retry re-attaches. */
  runId: string;
  parentRunId: string;
  /** The child's nesting as the parent sees it; admission counts from the parent's row in the run index instead. */
  depth: number;
  signal: AbortSignal;
}

export interface SubPipelineResult {
  status: "completed" | "failed" | "paused" | "terminated" | "running";
  outputs: Record<string, unknown>;
  error?: string | null;
}

export interface NodeServices {
  queryKnowledgeBase(
    auth: AuthContext,
    knowledgeBaseId: string,
    query: string,
    options: KnowledgeBaseQueryOptions,
    signal: AbortSignal,
  ): Promise<KnowledgeBaseQueryResult>;
  runTransformation(
    auth: AuthContext,
    transformationId: string,
    inputs: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Record<string, unknown>>;
  chat(auth: AuthContext, request: NodeChatRequest): Promise<{ text: string; model: string }>;
  runPipeline(
    auth: AuthContext,
    pipelineId: string,
    inputs: Record<string, unknown>,
    request: SubPipelineRequest,
  ): Promise<SubPipelineResult>;
  /** Create-time checks: `null` when the caller may use the record, else why not (one sentence). */
  checkKnowledgeBase(auth: AuthContext, knowledgeBaseId: string): Promise<string | null>;
  checkTransformation(auth: AuthContext, transformationId: string): Promise<string | null>;
}

/** A failure whose message is meant for the user (shown as the node's and the run's error). */
export { NodeFailure } from "./node-failure";

/**
 * The provider registry's model name for an llm node: `<connection>/<model>`. A `connection_id`
 * names the connection by id (of the run's organization); a bare `model` is passed as written
 * (a connection name, `<connection>/<model>`, or `loom/extractive`); neither means the
 * organization's first chat connection.
 */
async function chatModelName(env: Env, auth: AuthContext, request: NodeChatRequest): Promise<string | undefined> {
  if (!request.connectionId) return request.model;
  const rows = await database(env)
    .select({ name: connections.name })
    .from(connections)
    .where(and(eq(connections.id, request.connectionId), eq(connections.orgId, auth.orgId)))
    .limit(1);
  if (!rows[0]) throw new NodeFailure(`connection ${request.connectionId} does not exist or you cannot use it`);
  if (!request.model) return rows[0].name;
  return request.model.includes("/") ? request.model : `${rows[0].name}/${request.model}`;
}

/** Resolves when the signal aborts, so a node stops waiting at once when its run is terminated or times out. */
function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(new NodeFailure("the node was cancelled"));
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}

/**
 * A knowledge-base node's query and options, checked with the knowledge-base query's own schema
 * (the same defaults and bounds as `POST /v1/knowledge-base/{id}/query`). Answers the parsed
 * body, or the first problem as `field: message`.
 */
export function parseKnowledgeBaseQuery(
  query: string,
  options: KnowledgeBaseQueryOptions,
): { ok: true; body: z.output<typeof QueryBody> } | { ok: false; problem: string } {
  const parsed = QueryBody.safeParse({
    queries: [query],
    search_metadata: options.search_metadata ?? {},
    config: options.config ?? {},
  });
  if (parsed.success) return { ok: true, body: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, problem: `${issue.path.map(String).join(".")}: ${issue.message}` };
}

/** A query result as a node's outputs: the items, and context text for a model. */
function knowledgeBaseOutputs(result: QueryResult): KnowledgeBaseQueryResult {
  const items = result.chunks ?? result.documents ?? result.pages ?? [];
  const text = result.formatted_text ?? items.map((item, i) => `[${i + 1}] ${item.text}`).join("\n\n");
  return { text, results: items, response: result.response };
}

/**
 * The production wiring: transformations run through the transformations feature (a metered
 * sandbox), knowledge-base nodes through the knowledge-base query with its model-backed options,
 * llm nodes through the provider registry (chat models from the organization's connections),
 * and sub-pipelines through our own runs. Models are reached through `providers` (the app's
 * `Deps.providers`: the network, retries).
 */
export function productionNodeServices(env: Env, providers: ProviderDeps): NodeServices {
  return {
    async queryKnowledgeBase(auth, knowledgeBaseId, query, options, signal) {
      if (query.trim() === "") throw new NodeFailure("the query is empty");
      const parsed = parseKnowledgeBaseQuery(query, options);
      if (!parsed.ok) throw new NodeFailure(parsed.problem);
      // The same query the API runs, with its model-backed options (rerank, advanced QA ...).
      return knowledgeBaseOutputs(
        await Promise.race([
          queryWithModelOptions(env, auth, knowledgeBaseId, parsed.body, providers),
          whenAborted(signal),
        ]),
      );
    },
    async runTransformation(auth, transformationId, inputs, signal) {
      return Promise.race([runTransformation(env, auth, transformationId, inputs), whenAborted(signal)]);
    },
    async chat(auth, request) {
      const name = await chatModelName(env, auth, request);
      const model = await chatModelFor(env, auth, name, {
        ...providers,
        allowExtractive: name === EXTRACTIVE_MODEL,
        purpose: "an llm node",
      });
      const result = await model.complete({
        messages: request.messages,
        temperature: request.temperature,
        maxTokens: request.maxTokens,
        signal: request.signal,
      });
      return { text: result.text, model: result.model };
    },
    async runPipeline(auth, pipelineId, inputs, request) {
      return runChildPipeline(env, auth, pipelineId, inputs, request);
    },
    async checkKnowledgeBase(auth, knowledgeBaseId) {
      try {
        await visibleKnowledgeBase(env, auth, knowledgeBaseId);
        return null;
      } catch (error) {
        if (error instanceof AppError && error.code === "not_found")
          return `knowledge base ${knowledgeBaseId} does not exist or you cannot use it`;
        throw error;
      }
    },
    async checkTransformation(auth, transformationId) {
      try {
        await getTransformation(env, auth, { id: transformationId });
        return null;
      } catch (error) {
        if (error instanceof AppError && error.code === "not_found")
          return `transformation ${transformationId} does not exist or you cannot use it`;
        throw error;
      }
    },
  };
}
