import { bearer, call } from "../helpers";

/**
 * Requests exactly as the hosted platform's Python SDK (`vectorshift` 0.0.76-0.0.82) puts them
 * on the wire: `requests` with `json=` (JSON, every unset pydantic option as null) or with
 * `data=` and `files=` (multipart: the plain fields in order, then the file parts, which carry a
 * filename and no content type).
 */

export type Body = Record<string, unknown>;

export interface SdkResponse {
  status: number;
  body: Body;
}

async function answer(response: Response): Promise<SdkResponse> {
  return { status: response.status, body: (await response.json()) as Body };
}

/** `request_client.request(method, endpoint, query=..., json=...)` without files. */
export async function sdkRequest(
  apiKey: string,
  method: string,
  endpoint: string,
  options: { query?: Record<string, string>; json?: unknown } = {},
): Promise<SdkResponse> {
  const search = options.query ? `?${new URLSearchParams(options.query).toString()}` : "";
  const init: RequestInit = { method, headers: { ...bearer(apiKey), "content-type": "application/json" } };
  // `requests` sends no body at all when json is None.
  if (options.json !== undefined) init.body = JSON.stringify(options.json);
  return answer(await call(`/v1${endpoint}${search}`, init));
}

export interface SdkFilePart {
  field: string;
  filename: string;
  content: string | Uint8Array;
  /** `requests` with a `(name, content, mime)` tuple (as `upload_files` sends) or `aiohttp` give the part a content type. */
  contentType?: string;
}

/** The multipart body `requests` builds from `data=` (strings) and `files=[(field, open(path, "rb"))]`. */
export function sdkMultipart(
  fields: [string, string][],
  files: SdkFilePart[],
): { body: Uint8Array; contentType: string } {
  const boundary = "8c4a1f0e2b7d4d1e9b6f3a5c0d2e4f61";
  const encoder = new TextEncoder();
  const chunks: Uint8Array[] = [];
  for (const [name, value] of fields)
    chunks.push(encoder.encode(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  for (const file of files) {
    const type = file.contentType ? `Content-Type: ${file.contentType}\r\n` : "";
    chunks.push(
      encoder.encode(
        `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${file.filename}"\r\n${type}\r\n`,
      ),
    );
    chunks.push(typeof file.content === "string" ? encoder.encode(file.content) : file.content);
    chunks.push(encoder.encode("\r\n"));
  }
  chunks.push(encoder.encode(`--${boundary}--\r\n`));
  const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

/** `request_client.request("POST", endpoint, json=data, files=files)`. */
export async function sdkUpload(
  apiKey: string,
  endpoint: string,
  fields: [string, string][],
  files: SdkFilePart[],
): Promise<SdkResponse> {
  const { body, contentType } = sdkMultipart(fields, files);
  return answer(
    await call(`/v1${endpoint}`, { method: "POST", headers: { ...bearer(apiKey), "content-type": contentType }, body }),
  );
}

/** `IndexingConfig().model_dump()`: what `index_document` sends as `config` when the caller sets nothing. */
export const DEFAULT_INDEXING_CONFIG = {
  index_tables: false,
  analyze_documents: false,
  enrichment_tasks: null,
  file_processing_implementation: "Default",
  chunk_size: null,
  chunk_overlap: null,
  apify_key: null,
};

/** `SearchMetadata().model_dump()`. */
export const DEFAULT_SEARCH_METADATA = { filter: null, opensearch_filter: null, group_by_key: null, top_k: 5 };

/** `QueryConfig().model_dump()`: all 14 keys, every one null. */
export const DEFAULT_QUERY_CONFIG = {
  rerank_documents: null,
  generate_metadata_filters: null,
  transform_query: null,
  answer_multi_query: null,
  expand_query: null,
  do_advanced_qa: null,
  format_context_for_llm: null,
  generate_ai_doc_summaries: null,
  retrieval_unit: null,
  score_cutoff: null,
  retrieval_config: null,
  reranking_config: null,
  question_answering_config: null,
  hybrid_search_config: null,
};

/** `KnowledgeBase.new(name)`; answers the id the SDK reads. */
export async function sdkNewKnowledgeBase(apiKey: string, name = `kb-${crypto.randomUUID()}`): Promise<string> {
  const created = await sdkRequest(apiKey, "POST", "/knowledge-base", {
    json: {
      name,
      file_processing_implementation: "Default",
      chunk_size: 400,
      chunk_overlap: 0,
      analyze_documents: false,
    },
  });
  if (created.status !== 200)
    throw new Error(`KnowledgeBase.new failed: ${created.status} ${JSON.stringify(created.body)}`);
  return String(created.body.id);
}

/** `kb.index_document("file", path, custom_metadata=...)`: the multipart form the SDK sends. */
export function sdkIndexFile(
  apiKey: string,
  kbId: string,
  file: { name: string; mime: string; content: string | Uint8Array },
  options: { customMetadata?: Body; config?: Body } = {},
): Promise<SdkResponse> {
  const fields: [string, string][] = [
    ["file_data", "true"],
    ["file_data.metadata.name", file.name],
    ["file_data.metadata.mime_type", file.mime],
  ];
  if (options.customMetadata) fields.push(["file_data.custom_metadata", JSON.stringify(options.customMetadata)]);
  fields.push(["config", JSON.stringify(options.config ?? DEFAULT_INDEXING_CONFIG)]);
  return sdkUpload(apiKey, `/knowledge-base/${kbId}/index`, fields, [
    { field: "file_data.file", filename: file.name, content: file.content },
  ]);
}

/** `kb.query(queries, ...)` with the SDK's defaults for everything not given. */
export function sdkQuery(
  apiKey: string,
  kbId: string,
  queries: string[],
  options: { searchMetadata?: Body; config?: Body } = {},
): Promise<SdkResponse> {
  return sdkRequest(apiKey, "POST", `/knowledge-base/${kbId}/query`, {
    json: {
      queries,
      search_metadata: { ...DEFAULT_SEARCH_METADATA, ...options.searchMetadata },
      config: { ...DEFAULT_QUERY_CONFIG, ...options.config },
    },
  });
}

/**
 * `kb.index_document("url", url, url_data_config=URLDataConfig(...))`: JSON `url_data` with the
 * request's options left out when unset (`recursive` True and `return_type` "CHUNKS" by default,
 * `recursive_url_limit` sent as `url_limit`), `rescrape_frequency` "Never" by default, and the
 * default IndexingConfig as `config`.
 */
export function sdkIndexUrl(
  apiKey: string,
  kbId: string,
  url: string,
  options: {
    recursive?: boolean;
    return_type?: string;
    recursive_url_limit?: number;
    ai_enhance_content?: boolean;
    apify_key?: string;
    rescrape_frequency?: string;
  } = {},
): Promise<SdkResponse> {
  const request: Body = { url, recursive: options.recursive ?? true, return_type: options.return_type ?? "CHUNKS" };
  if (options.recursive_url_limit !== undefined) request.url_limit = options.recursive_url_limit;
  if (options.ai_enhance_content !== undefined) request.ai_enhance_content = options.ai_enhance_content;
  if (options.apify_key !== undefined) request.apify_key = options.apify_key;
  return sdkRequest(apiKey, "POST", `/knowledge-base/${kbId}/index`, {
    json: {
      url_data: { request, rescrape_frequency: options.rescrape_frequency ?? "Never" },
      config: DEFAULT_INDEXING_CONFIG,
    },
  });
}
