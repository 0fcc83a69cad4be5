import { and, desc, eq, inArray } from "drizzle-orm";
import type { AuthContext, Env } from "../../../env";
import { database } from "../../../db/client";
import { kbDocuments } from "../../../db/schema/knowledge-bases";
import { badRequest } from "../../../lib/errors";
import { chatModelFor, rerankerFor, type ProviderDeps } from "../../../providers/registry";
import { expandQuery } from "../../../providers/query-expansion";
import type { ChatModel, Reranker } from "../../../providers/types";
import { UsageMeter } from "../../../providers/usage";
import { indexStub } from "../durable-object-vector-index";
import type { QueryInput } from "../knowledge-bases.schemas";
import { queryableKnowledgeBase } from "../knowledge-bases.service";
import { visiblePrefetched } from "../index-lookup";
import { FilterParseError, parseQdrantFilter } from "../metadata-filter";
import { mergeMissing, type MissingShard } from "../shard-scatter";
import {
  planQuery,
  queryVisibleKnowledgeBase,
  type QueryHooks,
  type QueryPlan,
  type QueryResult,
} from "../query.service";
import { advancedAnswer, type QaAnswer } from "./advanced-qa";
import { d1SummaryCache, summarizeDocuments } from "./doc-summaries";
import { proposeMetadataFilter, type MetadataKey } from "./metadata-filter-proposal";
import { generateQueryVariants, transformQuery } from "./query-rewriting";
import { DEFAULT_RERANK_DEPTH, rerankItems } from "./rerank";

/** Alternative queries `answer_multi_query` adds to the user's. */
const MULTI_QUERY_VARIANTS = 3;
/** Feedback documents and added terms for `expand_query` (the defaults measured on Cranfield). */
const PRF_FEEDBACK_DOCS = 5;
/** Chunk metadata keys every document has, besides its custom metadata. */
const BUILT_IN_KEYS = ["document_id", "name", "path", "mime_type", "source"];
/** Characters of a document read for its summary. */
const SUMMARY_DOCUMENT_CHARS = 12_000;

/** Stands in for the real hooks while the plan is only being validated. */
const unused = async (): Promise<never> => {
  throw new Error("validation only");
};
const ALL_HOOKS: QueryHooks = {
  transformQuery: unused,
  expandQuery: unused,
  generateMetadataFilter: unused,
  rerank: unused,
  answer: unused,
  summarize: unused,
};

export interface KnowledgeBaseQueryResult extends QueryResult {
  usage: ReturnType<UsageMeter["report"]>;
  /** How `response` was produced: the model, whether it is extractive, its mode and its citations. */
  answer_metadata?: Omit<QaAnswer, "text">;
  /** The filter `generate_metadata_filters` applied, or why the model's proposal was not used. */
  generated_filter?: { applied: Record<string, unknown> } | { rejected: string };
}

function option(
  input: QueryInput,
  name:
    | "transform_query"
    | "expand_query"
    | "answer_multi_query"
    | "generate_metadata_filters"
    | "do_advanced_qa"
    | "generate_ai_doc_summaries"
    | "rerank_documents",
): boolean {
  return input.config?.[name] === true;
}

/** The metadata keys the knowledge base's documents actually carry, with a few sample values each. */
async function metadataKeysOf(env: Env, kbId: string): Promise<MetadataKey[]> {
  const rows = await database(env)
    .select({
      name: kbDocuments.name,
      source: kbDocuments.source,
      mimeType: kbDocuments.mimeType,
      custom: kbDocuments.customMetadata,
    })
    .from(kbDocuments)
    .where(eq(kbDocuments.kbId, kbId))
    .orderBy(desc(kbDocuments.createdAt))
    .limit(200);
  const values = new Map<string, Set<string | number | boolean>>(BUILT_IN_KEYS.map((k) => [k, new Set()]));
  for (const row of rows) {
    values.get("name")?.add(row.name);
    values.get("source")?.add(row.source);
    values.get("mime_type")?.add(row.mimeType);
    for (const [key, value] of Object.entries(row.custom)) {
      const set = values.get(key) ?? new Set();
      if ((typeof value === "string" && value.length <= 100) || typeof value === "number" || typeof value === "boolean")
        set.add(value);
      values.set(key, set);
    }
  }
  return [...values.entries()]
    .filter(([key]) => key !== "document_id" && key !== "path")
    .map(([key, set]) => ({ key, values: [...set].slice(0, 5) }));
}

/** First retrieval for pseudo-relevance feedback: the keyword index's top documents for the query. */
async function feedbackFor(
  env: Env,
  plan: QueryPlan,
  query: string,
  missing: MissingShard[],
): Promise<{ text: string; score: number }[]> {
  const stub = indexStub(env, plan.kb.id);
  const { hits, missing: unsearched } = await stub.keywordSearch(query, {
    topK: PRF_FEEDBACK_DOCS,
    filter: plan.filter,
  });
  const read = await stub.getChunks(hits.map((h) => h.id));
  missing.push(...unsearched, ...read.missing);
  const chunks = new Map(read.chunks.map((c) => [c.id, c.text]));
  return hits.flatMap((h) => (chunks.has(h.id) ? [{ text: chunks.get(h.id) ?? "", score: h.score }] : []));
}

/**
 * `POST /v1/knowledge-base/{id}/query` with the options that need a model. Models are resolved
 * before any retrieval, so a missing connection is a quick 400; query preparation (transform, then
 * alternative queries) happens here so `result.queries` shows exactly what ran; the knowledge-base
 * query plan calls back for expansion, generated filters, reranking, answers and summaries.
 */
export async function queryWithModelOptions(
  env: Env,
  auth: AuthContext,
  kbId: string,
  input: QueryInput,
  deps: ProviderDeps,
  prefetched?: unknown[],
): Promise<KnowledgeBaseQueryResult> {
  // The route reads the record with the API key (one D1 call); other callers (pipelines) read it here.
  const kb = prefetched ? visiblePrefetched(prefetched, auth, kbId) : await queryableKnowledgeBase(env, auth, kbId);
  const config = input.config ?? {};
  const usage = new UsageMeter();
  const qaModelName = config.question_answering_config?.qa_model;
  const needsGenerative = (
    ["transform_query", "answer_multi_query", "generate_metadata_filters", "generate_ai_doc_summaries"] as const
  ).filter((name) => option(input, name));
  const chat: ChatModel | undefined = needsGenerative.length
    ? await chatModelFor(env, auth, qaModelName, { ...deps, purpose: `config.${needsGenerative[0]}` })
    : undefined;
  const qaModel: ChatModel | undefined = option(input, "do_advanced_qa")
    ? await chatModelFor(env, auth, qaModelName, { ...deps, allowExtractive: true, purpose: "config.do_advanced_qa" })
    : undefined;
  const rerankConfig = config.reranking_config;
  const reranker: Reranker | undefined = option(input, "rerank_documents")
    ? await rerankerFor(env, auth, rerankConfig?.reranking_model, {
        ...deps,
        apiKey: rerankConfig?.api_key || undefined,
        purpose: "config.rerank_documents",
      })
    : undefined;

  // Query preparation: the queries that will actually run. The rest of the request is validated
  // first, so a bad retrieval unit or filter costs no model call.
  const prepared = (queries: string[]): QueryInput => ({
    ...input,
    queries,
    query: undefined,
    config: { ...config, transform_query: false, answer_multi_query: false },
  });
  let queries = [...(input.queries ?? []), ...(input.query ? [input.query] : [])].map((q) => q.trim()).filter(Boolean);
  if (queries.length === 0) throw badRequest("queries: give at least one non-empty query");
  planQuery(kb, prepared(queries), ALL_HOOKS);
  if (chat && option(input, "transform_query"))
    queries = await Promise.all(queries.map((q) => transformQuery(chat, q, input.context, usage)));
  if (chat && option(input, "answer_multi_query")) {
    const variants = (
      await Promise.all(queries.map((q) => generateQueryVariants(chat, q, MULTI_QUERY_VARIANTS, usage)))
    ).flat();
    queries = [...new Set([...queries, ...variants])];
  }

  let answer: QaAnswer | undefined;
  // Shards the model steps' own reads (feedback documents, summaries' texts) could not reach.
  const missing: MissingShard[] = [];
  let generatedFilter: KnowledgeBaseQueryResult["generated_filter"];
  const hooks: QueryHooks = {
    expandQuery: async (plan) => {
      const expanded = await Promise.all(
        plan.queries.map(async (q) => expandQuery(q, await feedbackFor(env, plan, q, missing)).query),
      );
      return expanded.filter((q, i) => q !== plan.queries[i]);
    },
    generateMetadataFilter: async (plan) => {
      if (!chat) return undefined;
      const proposal = await proposeMetadataFilter(
        chat,
        plan.queries.join("\n"),
        await metadataKeysOf(env, plan.kb.id),
        usage,
      );
      if (!proposal.filter) {
        generatedFilter = proposal.rejected ? { rejected: proposal.rejected } : undefined;
        return undefined;
      }
      try {
        // Compiled exactly like a user's filter; a proposal the compiler refuses is reported, not applied.
        const compiled = parseQdrantFilter(proposal.filter);
        generatedFilter = { applied: proposal.filter };
        return compiled;
      } catch (error) {
        if (!(error instanceof FilterParseError)) throw error;
        generatedFilter = { rejected: `the proposed filter did not compile: ${error.message}` };
        return undefined;
      }
    },
    rerank: async (plan, items) =>
      reranker
        ? rerankItems(
            reranker,
            plan.queries[0] ?? "",
            items,
            rerankConfig?.num_chunks_to_rerank ?? DEFAULT_RERANK_DEPTH,
          )
        : items,
    answer: async (plan, items) => {
      if (!qaModel) return "";
      const mode = config.question_answering_config?.advanced_qa_mode === "accurate" ? "accurate" : "fast";
      answer = await advancedAnswer(qaModel, queries[0] ?? plan.queries[0] ?? "", items, mode, usage);
      return answer.text;
    },
    summarize: async (plan, items) => {
      if (!chat) return {};
      const documentIds = [...new Set(items.map((i) => i.document_id))].slice(0, 20);
      if (documentIds.length === 0) return {};
      const rows = await database(env)
        .select({ id: kbDocuments.id, contentHash: kbDocuments.contentHash })
        .from(kbDocuments)
        .where(and(eq(kbDocuments.kbId, plan.kb.id), inArray(kbDocuments.id, documentIds)));
      const read = await indexStub(env, plan.kb.id).documentChunks(documentIds, 40);
      missing.push(...read.missing);
      const chunks = read.chunks;
      const texts = new Map<string, string>();
      for (const chunk of [...chunks].sort((a, b) => a.position - b.position)) {
        const sofar = texts.get(chunk.documentId) ?? "";
        if (sofar.length < SUMMARY_DOCUMENT_CHARS)
          texts.set(chunk.documentId, sofar ? `${sofar}\n\n${chunk.text}` : chunk.text);
      }
      const sources = rows
        .map((r) => ({ documentId: r.id, contentHash: r.contentHash, text: texts.get(r.id) ?? "" }))
        .filter((s) => s.text);
      return summarizeDocuments(chat, auth.orgId, sources, d1SummaryCache(env), usage);
    },
  };
  const result = await queryVisibleKnowledgeBase(env, kb, prepared(queries), hooks);
  const missingShards = mergeMissing(result.missing_shards ?? [], missing);
  return {
    ...result,
    ...(missingShards.length ? { partial: true as const, missing_shards: missingShards } : {}),
    usage: usage.report(),
    ...(answer
      ? {
          answer_metadata: {
            citations: answer.citations,
            model: answer.model,
            extractive: answer.extractive,
            mode: answer.mode,
          },
        }
      : {}),
    ...(generatedFilter ? { generated_filter: generatedFilter } : {}),
  };
}
