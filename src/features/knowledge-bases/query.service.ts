import type { AuthContext, Env } from "../../env";
import type { KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { badRequest, conflict } from "../../lib/errors";
import {
  combineFilters,
  FilterParseError,
  filterToSql,
  MAX_FILTER_SQL_PARAMS,
  parseOpenSearchFilter,
  parseQdrantFilter,
  type FilterNode,
} from "./metadata-filter";
import type { Scored } from "./index/hybrid-search";
import { resolveEmbedder } from "./embedders";
import { embeddingText } from "./index/keyword-query";
import { indexStub } from "./durable-object-vector-index";
import type { MissingShard } from "./shard-scatter";
import { queryableKnowledgeBase } from "./knowledge-bases.service";
import { vectorIndexFor } from "./vector-backend";
import type { QueryInput } from "./knowledge-bases.schemas";
import {
  groupInto,
  needsShaping,
  type IndexingBacklog,
  type ResultItem,
  type RetrievalUnit,
  type RetrieveRequest,
  type SearchMode,
} from "./index/retrieval";

/**
 * A query runs as a plan of steps: prepare queries -> embed -> retrieve, fuse and shape (one call
 * to the knowledge base's Durable Object, see retrieval.ts) -> group -> post-process. Steps that
 * need a language model (query transformation and expansion, metadata filter generation,
 * reranking, answers, summaries) are hooks; a request that asks for one with no hook supplied
 * answers 400 naming the connection it needs.
 */
export type { ResultItem, RetrievalUnit, SearchMode } from "./index/retrieval";

export interface QueryPlan {
  kb: KnowledgeBaseRow;
  queries: string[];
  context?: string;
  filter?: FilterNode;
  topK: number;
  mode: SearchMode;
  fusion: "rrf" | "weighted";
  alpha: number;
  dataFusion: "rrf" | "max";
  maxDocuments?: number;
  scoreCutoff?: number;
  groupByKey?: string;
  unit: RetrievalUnit;
  formatContext: boolean;
  config: QueryInput["config"];
}

/** One numbered source; `path`, `url` and `page` may come from a user's custom metadata, so any JSON. */
export interface Citation {
  source_number: number;
  id: string;
  document_id: string;
  name: string;
  path?: unknown;
  url?: unknown;
  page?: unknown;
  source: string;
  score: number;
}

export interface QueryResult {
  chunks?: ResultItem[];
  documents?: ResultItem[];
  pages?: ResultItem[];
  queries: string[];
  formatted_text?: string;
  citation_metadata?: Citation[];
  response?: string;
  summaries?: Record<string, string>;
  /** Present while documents are still indexing: what this answer could not search yet. */
  indexing?: IndexingBacklog;
  /** Present when a shard failed or timed out: the answer lacks its chunks (missing_shards names it). */
  partial?: true;
  missing_shards?: MissingShard[];
}

/** Plug-in points for the steps that need a model; each is optional until a provider layer fills it. */
export interface QueryHooks {
  transformQuery?(plan: QueryPlan): Promise<string[]>;
  expandQuery?(plan: QueryPlan): Promise<string[]>;
  generateMetadataFilter?(plan: QueryPlan): Promise<FilterNode | undefined>;
  rerank?(plan: QueryPlan, items: ResultItem[]): Promise<ResultItem[]>;
  answer?(plan: QueryPlan, items: ResultItem[]): Promise<string>;
  summarize?(plan: QueryPlan, items: ResultItem[]): Promise<Record<string, string>>;
}

const NEEDS: { option: keyof QueryInput["config"]; hook: keyof QueryHooks; connection: string }[] = [
  { option: "transform_query", hook: "transformQuery", connection: "a chat model connection" },
  { option: "expand_query", hook: "expandQuery", connection: "a chat model connection" },
  { option: "answer_multi_query", hook: "answer", connection: "a chat model connection" },
  { option: "generate_metadata_filters", hook: "generateMetadataFilter", connection: "a chat model connection" },
  { option: "do_advanced_qa", hook: "answer", connection: "a chat model connection" },
  { option: "generate_ai_doc_summaries", hook: "summarize", connection: "a chat model connection" },
  { option: "rerank_documents", hook: "rerank", connection: "a reranker connection" },
];

/**
 * Hybrid defaults, chosen by measurement (`npm run eval:retrieval`, Cranfield and CISI, one
 * setting for both): weighted fusion of z-scores leaning on BM25 (alpha 0.2) beat RRF, alpha 0.3
 * and min-max normalisation with the offline static embedder. An explicit
 * `fusion_method: "weighted"` without `alpha` uses the neutral 0.5.
 */
export const DEFAULT_FUSION = "weighted" as const;
export const DEFAULT_ALPHA = 0.2;

const UNIT_ALIASES: Record<string, RetrievalUnit> = {
  chunks: "chunks",
  chunk: "chunks",
  documents: "documents",
  document: "documents",
  pages: "pages",
  page: "pages",
};

function parseFilter(
  language: string,
  source: string | Record<string, unknown> | undefined,
  parse: (s: string | Record<string, unknown>) => FilterNode,
): FilterNode | undefined {
  if (source === undefined || (typeof source === "string" && source.trim() === "")) return undefined;
  try {
    return parse(source);
  } catch (error) {
    if (error instanceof FilterParseError) throw badRequest(`search_metadata.${language} is invalid ${error.message}`);
    throw error;
  }
}

export function planQuery(kb: KnowledgeBaseRow, input: QueryInput, hooks: QueryHooks): QueryPlan {
  const config = input.config;
  const meta = input.search_metadata;
  const queries = [...(input.queries ?? []), ...(input.query ? [input.query] : [])]
    .map((q) => q.trim())
    .filter(Boolean);
  if (config.embedding_model !== undefined && config.embedding_model !== kb.embeddingModel)
    throw conflict(
      `this knowledge base was indexed with ${kb.embeddingModel}; it cannot be queried with ${config.embedding_model}`,
    );
  if (queries.length === 0) throw badRequest("queries: give at least one non-empty query");
  const unitText = config.retrieval_unit ?? "chunks";
  const unit = UNIT_ALIASES[unitText];
  if (!unit) throw badRequest(`invalid retrieval unit: ${unitText}`);
  const qaMode = config.question_answering_config?.advanced_qa_mode;
  if (qaMode !== undefined && qaMode !== "fast" && qaMode !== "accurate")
    throw badRequest(`invalid advanced QA mode: ${qaMode}`);
  for (const need of NEEDS) {
    if (config[need.option] === true && !hooks[need.hook])
      throw badRequest(`config.${need.option} needs ${need.connection}; none is configured for this organization yet`);
  }
  if (meta.searchengine_filter !== undefined && meta.opensearch_filter !== undefined)
    throw badRequest("search_metadata: give searchengine_filter or opensearch_filter, not both");
  const filter = combineFilters(
    parseFilter("filter", meta.filter, parseQdrantFilter),
    parseFilter(
      meta.opensearch_filter !== undefined ? "opensearch_filter" : "searchengine_filter",
      meta.searchengine_filter ?? meta.opensearch_filter,
      parseOpenSearchFilter,
    ),
  );
  if (filter && filterToSql(filter).params.length > MAX_FILTER_SQL_PARAMS)
    throw badRequest(
      `search_metadata: the filters are too complex (more than ${MAX_FILTER_SQL_PARAMS} values to compare); simplify them`,
    );
  const hybrid = config.hybrid_search_config ?? {};
  const mode: SearchMode = config.retrieval_config?.search_mode ?? (kb.isHybrid ? "hybrid" : "vector");
  return {
    kb,
    queries,
    context: input.context,
    filter,
    topK: meta.top_k ?? 10,
    mode,
    fusion: hybrid.fusion_method ?? DEFAULT_FUSION,
    alpha: hybrid.alpha ?? (hybrid.fusion_method === undefined ? DEFAULT_ALPHA : 0.5),
    dataFusion: config.retrieval_config?.data_fusion_method ?? "rrf",
    maxDocuments: config.retrieval_config?.max_documents,
    scoreCutoff: config.score_cutoff,
    groupByKey: meta.group_by_key,
    unit,
    formatContext: config.format_context_for_llm === true,
    config,
  };
}

/** How many candidates each retriever returns before fusion and shaping. */
function candidateDepth(plan: QueryPlan): number {
  return Math.min(1000, Math.max(50, plan.topK * (needsShaping(plan) ? 20 : 5)));
}

/**
 * The vector half from a Vectorize index, when the deployment uses one: Vectorize answers by chunk
 * id and applies what it can of the filter; the index object maps the ids and applies all of it.
 */
async function vectorizeHits(env: Env, plan: QueryPlan, vectors: Float32Array[]): Promise<Scored[][] | undefined> {
  const backend = vectorIndexFor(env, plan.kb.id);
  if (!backend || plan.mode === "keyword") return undefined;
  return Promise.all(
    vectors.map(async (v) =>
      (await backend.query(v, { topK: candidateDepth(plan), filter: plan.filter })).matches.map((m) => ({
        id: m.id,
        score: m.score,
      })),
    ),
  );
}

function formatContext(items: ResultItem[]): { formatted_text: string; citation_metadata: Citation[] } {
  const citations = items.map(
    (item, i): Citation => ({
      source_number: i + 1,
      id: item.id,
      document_id: item.document_id,
      // chunkDocument always writes Loom's name and source over the custom metadata.
      name: String(item.metadata.name ?? ""),
      ...(item.metadata.path !== undefined ? { path: item.metadata.path } : {}),
      ...(item.metadata.url !== undefined ? { url: item.metadata.url } : {}),
      ...(item.metadata.page !== undefined ? { page: item.metadata.page } : {}),
      source: String(item.metadata.source ?? ""),
      score: item.score,
    }),
  );
  const blocks = items.map((item, i) => {
    const where = [
      item.metadata.name,
      item.metadata.page !== undefined ? `page ${String(item.metadata.page)}` : undefined,
    ]
      .filter(Boolean)
      .join(", ");
    return `[${i + 1}] ${where}\n${item.text}`;
  });
  const formatted = `Answer using only the numbered sources below and cite them as [n].\n\n${blocks.join("\n\n")}`;
  return { formatted_text: formatted, citation_metadata: citations };
}

export async function executePlan(env: Env, plan: QueryPlan, hooks: QueryHooks): Promise<QueryResult> {
  let queries = plan.queries;
  if (plan.config.transform_query && hooks.transformQuery) queries = await hooks.transformQuery(plan);
  if (plan.config.expand_query && hooks.expandQuery)
    queries = [...queries, ...(await hooks.expandQuery({ ...plan, queries }))];
  if (plan.config.generate_metadata_filters && hooks.generateMetadataFilter)
    plan = { ...plan, filter: combineFilters(plan.filter, await hooks.generateMetadataFilter(plan)) };

  let vectors: Float32Array[] = [];
  if (plan.mode !== "keyword") {
    const embedder = await resolveEmbedder(env, plan.kb.embeddingModel);
    if (embedder.model !== plan.kb.embeddingModel)
      throw conflict(
        `this knowledge base was indexed with ${plan.kb.embeddingModel}; it cannot be queried with ${embedder.model}`,
      );
    // A bag-of-words embedder reads only the query's search terms (keyword-query.ts embeddingText).
    vectors = await embedder.embed(embedder.orderFree ? queries.map(embeddingText) : queries);
  }
  const hits = await vectorizeHits(env, plan, vectors);
  const request: RetrieveRequest = {
    queries: queries.map((text, i) => ({
      text,
      vector: hits || !vectors[i] ? undefined : Array.from(vectors[i]),
      vectorHits: hits?.[i],
    })),
    mode: plan.mode,
    fusion: plan.fusion,
    alpha: plan.alpha,
    dataFusion: plan.dataFusion,
    filter: plan.filter,
    depth: candidateDepth(plan),
    topK: plan.topK,
    unit: plan.unit,
    scoreCutoff: plan.scoreCutoff,
    maxDocuments: plan.maxDocuments,
    groupByKey: plan.groupByKey,
  };
  const { ranked, pageTexts, indexing, partial } = await indexStub(env, plan.kb.id).retrieve(request);
  let items = groupInto(plan.unit, ranked, new Map(pageTexts)).slice(0, plan.topK);
  if (plan.config.rerank_documents && hooks.rerank) items = await hooks.rerank(plan, items);

  const result: QueryResult = {
    [plan.unit]: items,
    queries,
    ...(indexing ? { indexing } : {}),
    ...(partial ? { partial: true, missing_shards: partial.missing } : {}),
  };
  if (plan.formatContext) Object.assign(result, formatContext(items));
  if (plan.config.do_advanced_qa && hooks.answer) result.response = await hooks.answer(plan, items);
  if (plan.config.generate_ai_doc_summaries && hooks.summarize) result.summaries = await hooks.summarize(plan, items);
  return result;
}

/** No model-backed steps yet: the provider layer supplies these hooks later. */
export const NO_HOOKS: QueryHooks = {};

export async function queryKnowledgeBase(
  env: Env,
  auth: AuthContext,
  kbId: string,
  input: QueryInput,
  hooks: QueryHooks = NO_HOOKS,
): Promise<QueryResult> {
  return queryVisibleKnowledgeBase(env, await queryableKnowledgeBase(env, auth, kbId), input, hooks);
}

/** The same, for a caller that has already checked the knowledge base is visible (one D1 read saved per query). */
export function queryVisibleKnowledgeBase(
  env: Env,
  kb: KnowledgeBaseRow,
  input: QueryInput,
  hooks: QueryHooks = NO_HOOKS,
): Promise<QueryResult> {
  return executePlan(env, planQuery(kb, input, hooks), hooks);
}
