import { z } from "@hono/zod-openapi";
import { zArray, zBool, zFreeObject, zId, zInt, zJsonObject, zNumber, zString } from "../../lib/schema";
import { CHUNK_OVERLAP_MAX, CHUNK_SIZE_MAX, CHUNK_SIZE_MIN } from "./chunker";

export const MAX_QUERIES = 10;
export const MAX_QUERY_TOP_K = 100;
export const MAX_FILTER_CHARS = 16 * 1024;

export const KnowledgeBaseParams = z.object({ id: zId() });

const chunkSize = () =>
  zInt(CHUNK_SIZE_MIN, CHUNK_SIZE_MAX).openapi({
    description: `Tokens per chunk, ${CHUNK_SIZE_MIN}-${CHUNK_SIZE_MAX}.`,
  });
const chunkOverlap = () =>
  zInt(0, CHUNK_OVERLAP_MAX).openapi({
    description: `Tokens shared by consecutive chunks, 0-${CHUNK_OVERLAP_MAX}, less than chunk_size.`,
  });

export const KnowledgeBaseCreateBody = z
  .object({
    name: zString(1, 200),
    description: zString(0, 2000).optional().default(""),
    chunk_size: chunkSize().optional().default(400),
    chunk_overlap: chunkOverlap().optional().default(0),
    file_processing_implementation: z
      .literal("Default")
      .optional()
      .default("Default")
      .openapi({ description: "Only `Default` exists in Loom." }),
    analyze_documents: zBool()
      .optional()
      .default(false)
      .openapi({ description: "Recorded; Loom does not analyse documents yet." }),
    is_hybrid: zBool().optional().default(true),
    embedding_model: zString(1, 200).optional(),
  })
  .refine((b) => b.chunk_overlap < b.chunk_size, {
    message: "chunk_overlap must be less than chunk_size",
    path: ["chunk_overlap"],
  })
  .openapi("KnowledgeBaseCreateBody");

const FileMetadata = z.object({
  name: zString(1, 500).optional(),
  path: zString(1, 2000).optional(),
  mime_type: zString(1, 200).optional(),
  size: z.number().int().min(0).optional(),
});

const FilePart = z.object({
  type: z.literal("file").optional(),
  raw_bytes: z.string().min(1, "must not be empty").openapi({ description: "The file's bytes, base64." }),
  metadata: zJsonObject(FileMetadata).optional().default({}),
});

/** Files one index request may carry (the batch form); more is a 400. */
export const MAX_FILES_PER_REQUEST = 100;

const FileData = z
  .object({
    file: z
      .union([zJsonObject(FilePart), z.array(zJsonObject(FilePart)).min(1).max(MAX_FILES_PER_REQUEST)])
      // Optional here and required by the refinement below, so a missing file is named as such rather than reported as the list form's error.
      .optional()
      .openapi({
        description: `Required. One file, or several (a multipart body with several \`file_data.file\` parts gives a list), at most ${MAX_FILES_PER_REQUEST} per request.`,
      }),
    metadata: zJsonObject(FileMetadata).optional().openapi({
      description:
        "The hosted SDK's place for the file's `name` and `mime_type` (beside a multipart part `file_data.file`); overrides `file.metadata`.",
    }),
    custom_metadata: zFreeObject(16 * 1024).optional(),
  })
  .superRefine((v, ctx) => {
    if (v.file === undefined)
      ctx.addIssue({ code: "custom", path: ["file"], message: "Invalid input: expected object, received undefined" });
  });

export const IndexConfig = z.object({
  index_tables: zBool().optional(),
  analyze_documents: zBool().optional(),
  enrichment_tasks: zArray(z.string().max(200), 20).optional(),
  file_processing_implementation: z.literal("Default").optional(),
  chunk_size: chunkSize().optional(),
  chunk_overlap: chunkOverlap().optional(),
  scraper_api_key: z
    .string()
    .max(500)
    .optional()
    .openapi({ description: "Accepted and ignored, never stored: Loom fetches its sources and web pages itself." }),
  apify_key: z
    .string()
    .max(500)
    .optional()
    .openapi({ description: "The hosted SDK's name for `scraper_api_key`; accepted and ignored alike." }),
});

const SourceRef = () => zString(1, 2000);

/** Pages one `url_data` crawl may index: the default, and the hard cap (more is a 400). */
export const URL_LIMIT_DEFAULT = 10;
export const URL_LIMIT_MAX = 100;
export const RESCRAPE_FREQUENCIES = ["Never", "Daily", "Weekly", "Monthly"] as const;

const UrlRequest = z.object({
  url: zString(1, 2000).openapi({ description: "The page to index: an http or https URL of a named public host." }),
  recursive: zBool().optional().default(false).openapi({
    description: "Also index pages of the same site linked from it, breadth-first, up to `url_limit` pages in all.",
  }),
  return_type: z.enum(["CHUNKS", "CONTENT"]).optional().default("CHUNKS").openapi({
    description: "`CHUNKS`: one document per page. `CONTENT`: one document for the whole crawl, one page per web page.",
  }),
  url_limit: zInt(1, URL_LIMIT_MAX)
    .optional()
    .openapi({
      description: `Pages indexed at most, counting the first (default ${URL_LIMIT_DEFAULT}, at most ${URL_LIMIT_MAX}).`,
    }),
  ai_enhance_content: zBool()
    .optional()
    .openapi({ description: "Accepted; Loom indexes the page's own text and does not rewrite it with a model." }),
  apify_key: z
    .string()
    .max(500)
    .optional()
    .openapi({ description: "Accepted and ignored, never stored: Loom fetches pages itself." }),
});

const UrlData = z.object({
  request: zJsonObject(UrlRequest),
  rescrape_frequency: z
    .enum(RESCRAPE_FREQUENCIES)
    .optional()
    .default("Never")
    .openapi({ description: "How often the index object fetches the pages again and replaces their documents." }),
});

export const IndexBody = z
  .object({
    file_data: z
      .union([zJsonObject(FileData), z.array(zJsonObject(FileData)).min(1).max(MAX_FILES_PER_REQUEST)])
      .optional()
      .openapi({
        description: `A file, or a list of them (the batch form: at most ${MAX_FILES_PER_REQUEST} files in all, each with its own metadata and custom_metadata). \`document_ids\` answers one id per file, in order. A file that cannot be read refuses the whole request (400 naming the file) and nothing of it is stored.`,
      }),
    encyclopedia: SourceRef().optional(),
    wikipedia: SourceRef().optional(),
    video: SourceRef().optional(),
    youtube: SourceRef().optional(),
    preprint: SourceRef().optional(),
    arxiv: SourceRef().optional(),
    url_data: zJsonObject(UrlData).optional(),
    config: zJsonObject(IndexConfig).optional().default({}),
  })
  .openapi("KnowledgeBaseIndexBody");

const SearchMetadata = z.object({
  filter: z.union([z.string().max(MAX_FILTER_CHARS), z.record(z.string(), z.unknown())]).optional(),
  searchengine_filter: z.union([z.string().max(MAX_FILTER_CHARS), z.record(z.string(), z.unknown())]).optional(),
  opensearch_filter: z.union([z.string().max(MAX_FILTER_CHARS), z.record(z.string(), z.unknown())]).optional(),
  top_k: zInt(1, MAX_QUERY_TOP_K).optional(),
  group_by_key: zString(1, 128).optional(),
});

const QueryConfig = z.object({
  rerank_documents: zBool().optional(),
  generate_metadata_filters: zBool().optional(),
  transform_query: zBool().optional(),
  answer_multi_query: zBool().optional(),
  expand_query: zBool().optional(),
  do_advanced_qa: zBool().optional(),
  format_context_for_llm: zBool().optional(),
  generate_ai_doc_summaries: zBool().optional(),
  retrieval_unit: z.string().max(50).optional(),
  retrieval_config: zJsonObject(
    z.object({
      max_documents: zInt(1, 100).optional(),
      data_fusion_method: z.enum(["rrf", "max"]).optional(),
      search_mode: z.enum(["hybrid", "keyword", "vector"]).optional().openapi({
        description:
          "Loom extension: which retrievers run (default hybrid when the knowledge base is hybrid, else vector).",
      }),
    }),
  ).optional(),
  reranking_config: zJsonObject(
    z.object({
      reranking_model: zString(1, 200).optional(),
      api_key: z.string().max(500).optional(),
      num_chunks_to_rerank: zInt(1, 500).optional(),
    }),
  ).optional(),
  question_answering_config: zJsonObject(
    z.object({
      qa_model: zString(1, 200).optional(),
      advanced_qa_mode: z.string().max(50).optional(),
    }),
  ).optional(),
  hybrid_search_config: zJsonObject(
    z.object({
      alpha: zNumber(0, 1).optional(),
      fusion_method: z.enum(["rrf", "weighted"]).optional(),
    }),
  ).optional(),
  score_cutoff: zNumber(-1e9, 1e9).optional(),
  embedding_model: zString(1, 200).optional().openapi({
    description:
      "Loom extension: the embedding model the caller expects; a knowledge base indexed with another answers 409.",
  }),
});

export const QueryBody = z
  .object({
    queries: zArray(zString(1, 4000), MAX_QUERIES).optional(),
    query: zString(1, 4000).optional().openapi({ description: "One query; the same as `queries: [query]`." }),
    context: zString(0, 20000).optional(),
    search_metadata: zJsonObject(SearchMetadata).optional().default({}),
    config: zJsonObject(QueryConfig).optional().default({}),
  })
  .openapi("KnowledgeBaseQueryBody");

export type KnowledgeBaseCreateInput = z.output<typeof KnowledgeBaseCreateBody>;
export type IndexInput = z.output<typeof IndexBody>;
export type FileDataInput = z.output<typeof FileData>;
export type UrlDataInput = z.output<typeof UrlData>;
export type QueryInput = z.output<typeof QueryBody>;

/** The hosted SDK's `find_documents` filters; each given one must match. */
export const DocumentsListQuery = z.object({
  title: zString(1, 500)
    .optional()
    .openapi({ description: "Only the documents with exactly this name (a file's name, an article's title)." }),
  folder_id: zString(1, 100)
    .optional()
    .openapi({ description: "Only documents in this folder. Loom has no folders yet, so nothing matches." }),
  integration_id: zString(1, 100)
    .optional()
    .openapi({ description: "Only documents synced from this integration. Loom syncs none yet, so nothing matches." }),
});
export type DocumentsListFilters = z.output<typeof DocumentsListQuery>;

export const DocumentsDeleteQuery = z.object({
  document_ids: zString(1, 100 * 25).openapi({ description: "Comma-separated document ids." }),
});
