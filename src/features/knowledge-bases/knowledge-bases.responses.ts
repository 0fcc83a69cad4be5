import { z } from "@hono/zod-openapi";

export const DocumentIds = z
  .object({ status: z.literal("success"), document_ids: z.array(z.string()) })
  .openapi("DocumentIds");
export const DocumentList = DocumentIds.extend({ documents: z.array(z.record(z.string(), z.unknown())) }).openapi(
  "DocumentList",
);

const ResultItem = z.record(z.string(), z.unknown()).openapi("KnowledgeBaseResultItem");

/** A query's answer: the items (by the granularity asked for), the queries run, and what the model options added. */
export const KnowledgeBaseQueryResult = z
  .object({
    chunks: z.array(ResultItem).optional(),
    documents: z.array(ResultItem).optional(),
    pages: z.array(ResultItem).optional(),
    queries: z.array(z.string()),
    formatted_text: z.string().optional(),
    citation_metadata: z.array(z.record(z.string(), z.unknown())).optional(),
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
    generated_filter: z
      .union([z.object({ applied: z.record(z.string(), z.unknown()) }), z.object({ rejected: z.string() })])
      .optional(),
  })
  .openapi("KnowledgeBaseQueryResult");
export const KnowledgeBaseQueryAnswer = z
  .object({ status: z.literal("success"), result: KnowledgeBaseQueryResult })
  .openapi("KnowledgeBaseQueryAnswer");
