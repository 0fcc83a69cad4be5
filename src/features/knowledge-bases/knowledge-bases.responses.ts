import { z } from "@hono/zod-openapi";
import { fetchedObjectOf, objectListOf, ownedRecordShape } from "../../lib/response-schemas";

/** knowledgeBaseRecord's fields (knowledge-bases.service.ts). */
export const KnowledgeBase = z
  .object({
    ...ownedRecordShape,
    chunkSize: z.number().int(),
    chunkOverlap: z.number().int(),
    fileProcessingImplementation: z.string(),
    analyzeDocuments: z.boolean(),
    isHybrid: z.boolean(),
    embeddingModel: z.string(),
    embeddingDimensions: z.number().int(),
  })
  .openapi("KnowledgeBase");
const DocumentCounts = z.object({ indexing: z.number().int(), ready: z.number().int(), failed: z.number().int() });
/** A fetch adds how many of its documents are in each state. */
export const KnowledgeBaseFetched = fetchedObjectOf(
  "KnowledgeBase",
  KnowledgeBase.extend({
    documentsByState: DocumentCounts,
    shards: z.number().int().openapi({
      description: "Index objects (shards) the knowledge base's chunks are spread over; it splits as it grows",
    }),
  }).openapi("KnowledgeBaseDetail"),
);
export const KnowledgeBaseList = objectListOf("KnowledgeBase", KnowledgeBase);

/** documentRecord's fields; `customMetadata` is the user's own data and stays free-form. */
export const KnowledgeBaseDocument = z
  .object({
    _id: z.string(),
    knowledgeBaseId: z.string(),
    name: z.string(),
    path: z.string().nullable(),
    mimeType: z.string(),
    source: z.string(),
    size: z.number().int(),
    status: z.enum(["indexing", "ready", "failed"]),
    error: z.string().nullable(),
    chunkCount: z.number().int(),
    customMetadata: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
    updatedAt: z.string(),
    progress: z
      .object({ chunksIndexed: z.number().int(), chunksTotal: z.number().int() })
      .optional()
      .openapi({ description: "Present while the document is indexing" }),
  })
  .openapi("KnowledgeBaseDocument");

export const DocumentIds = z
  .object({ status: z.literal("success"), document_ids: z.array(z.string()) })
  .openapi("DocumentIds");
/** The shards a sharded answer could not ask, and why (query results and the documents list). */
const MissingShards = z.array(z.object({ shard: z.number().int(), reason: z.enum(["failed", "timeout"]) }));

export const DocumentList = DocumentIds.extend({
  documents: z.array(KnowledgeBaseDocument),
  partial: z.literal(true).optional().openapi({
    description:
      "Present only when a shard of this knowledge base's index failed or timed out while reading indexing progress: the documents it holds are listed without `progress`, and `missing_shards` names it.",
  }),
  missing_shards: MissingShards.optional().openapi({
    description: "With `partial`: the shards whose documents' progress this list lacks, and why.",
  }),
}).openapi("DocumentList");

/** retrieval.ts ResultItem: a chunk, document or page; `metadata` carries the document's custom metadata, free-form. */
const ResultItem = z
  .object({
    id: z.string(),
    document_id: z.string(),
    score: z.number(),
    text: z.string(),
    metadata: z.record(z.string(), z.unknown()),
  })
  .openapi("KnowledgeBaseResultItem");

/** query.service formatContext's citation; `path`, `url` and `page` come from metadata a user's custom metadata may set. */
const Citation = z
  .object({
    source_number: z.number().int(),
    id: z.string(),
    document_id: z.string(),
    name: z.string(),
    path: z.unknown().optional(),
    url: z.unknown().optional(),
    page: z.unknown().optional(),
    source: z.string(),
    score: z.number(),
  })
  .openapi("KnowledgeBaseCitation");

/** A query's answer: the items (by the granularity asked for), the queries run, and what the model options added. */
export const KnowledgeBaseQueryResult = z
  .object({
    chunks: z.array(ResultItem).optional(),
    documents: z.array(ResultItem).optional(),
    pages: z.array(ResultItem).optional(),
    queries: z.array(z.string()),
    formatted_text: z.string().optional(),
    citation_metadata: z.array(Citation).optional(),
    response: z.string().optional(),
    summaries: z.record(z.string(), z.string()).optional(),
    usage: z.object({
      input_tokens: z.number().int(),
      output_tokens: z.number().int(),
      total_tokens: z.number().int(),
      by_model: z.record(z.string(), z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() })),
    }),
    answer_metadata: z.record(z.string(), z.unknown()).optional(),
    indexing: z.object({ documents: z.number().int(), chunks: z.number().int() }).optional().openapi({
      description:
        "Present only while documents of this knowledge base are still indexing: how many documents, and how many of their chunks, this answer could not search yet. Absent means everything indexed was searched.",
    }),
    partial: z.literal(true).optional().openapi({
      description:
        "Present only when a shard of this knowledge base's index failed or timed out: the answer holds what the other shards found, and `missing_shards` says which part is missing.",
    }),
    missing_shards: MissingShards.optional().openapi({
      description: "With `partial`: the shards whose chunks this answer could not search, and why.",
    }),
    generated_filter: z
      .union([z.object({ applied: z.record(z.string(), z.unknown()) }), z.object({ rejected: z.string() })])
      .optional(),
  })
  .openapi("KnowledgeBaseQueryResult");
export const KnowledgeBaseQueryAnswer = z
  .object({ status: z.literal("success"), result: KnowledgeBaseQueryResult })
  .openapi("KnowledgeBaseQueryAnswer");
