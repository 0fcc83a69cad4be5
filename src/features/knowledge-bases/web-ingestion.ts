import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments, type KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import type { FetchFunction } from "../../lib/egress";
import { badRequest } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { auditInsert } from "../audit/audit.service";
import { indexStub } from "./durable-object-vector-index";
import type { ChunkSettings, indexOne, PreparedDocument } from "./ingestion.service";
import { URL_LIMIT_DEFAULT, type UrlDataInput } from "./knowledge-bases.schemas";
import { crawlFinished, startCrawl, type CrawlState } from "./web-crawl";
import type { WebPage } from "./web-pages";

/**
 * `url_data` on the request path: the first page is read here (so a refused, unreadable or
 * non-HTML URL is the request's 4xx), indexed at once, and anything more (the rest of a crawl,
 * re-scrapes) is handed to the knowledge base's index object as a web source that its alarm
 * advances (web-sources.ts).
 */
export type RescrapeFrequency = UrlDataInput["rescrape_frequency"];

/**
 * Web sources one knowledge base may keep crawling or re-scraping: each makes Loom fetch pages on
 * its own schedule, so their number is bounded like every other stored list.
 */
export const MAX_WEB_SOURCES = 100;

export const RESCRAPE_PERIOD_MS: Record<RescrapeFrequency, number | null> = {
  Never: null,
  Daily: 86_400_000,
  Weekly: 7 * 86_400_000,
  Monthly: 30 * 86_400_000,
};

/** A web source as the index object keeps it. */
export interface WebSourceRecord {
  id: string;
  kbId: string;
  orgId: string;
  userId: string;
  url: string;
  returnType: "CHUNKS" | "CONTENT";
  limit: number;
  settings: ChunkSettings;
  frequency: RescrapeFrequency;
  /** Page URL -> document id of the last finished crawl (`CONTENT`: the start URL -> its one document). */
  documents: Record<string, string>;
  /** The crawl in progress, or null between crawls. */
  crawl: CrawlState | null;
  /** Page URL -> document id for the crawl in progress. */
  crawlDocuments: Record<string, string>;
  /** `CONTENT`, first crawl: the document the request answered, filled when the crawl ends. */
  contentDocument: string | null;
}

/** The fetch web pages go through after the guard: the test's, else the WEB_FETCHER binding, else the network. */
export function webFetch(env: Env, override?: FetchFunction): FetchFunction | undefined {
  if (override) return override;
  const fetcher = env.WEB_FETCHER;
  return fetcher ? (input, init) => fetcher.fetch(input, init) : undefined;
}

/** `CHUNKS`: one document per page. `CONTENT`: one document for the crawl, a page per web page. */
export function pagesToDocuments(
  pages: Pick<WebPage, "url" | "title" | "markdown">[],
  returnType: "CHUNKS" | "CONTENT",
): PreparedDocument[] {
  const docs =
    returnType === "CONTENT"
      ? [{ name: pages[0].title, url: pages[0].url, texts: pages.map((p) => p.markdown) }]
      : pages.map((p) => ({ name: p.title, url: p.url, texts: [p.markdown] }));
  return docs.map((doc) => {
    const bytes = new TextEncoder().encode(doc.texts.join("\n\n"));
    return {
      name: doc.name,
      path: doc.url,
      mimeType: "text/markdown",
      source: "url",
      size: bytes.length,
      bytes,
      customMetadata: {},
      pages: doc.texts,
      extraMetadata: { title: doc.name, url: doc.url },
    };
  });
}

/** A `CONTENT` crawl's document, stored now as `indexing` and filled by the index object when the crawl ends. */
async function placeholderDocument(env: Env, auth: AuthContext, kb: KnowledgeBaseRow, page: WebPage): Promise<string> {
  const db = database(env);
  const id = newId();
  const now = new Date().toISOString();
  const row = {
    id,
    kbId: kb.id,
    orgId: kb.orgId,
    name: page.title,
    path: page.url,
    mimeType: "text/markdown",
    source: "url",
    size: 0,
    contentHash: `crawl:${id}`,
    r2Key: null,
    customMetadata: {},
    status: "indexing" as const,
    error: null,
    chunkCount: 0,
    createdAt: now,
    updatedAt: now,
  };
  await db.batch([
    db.insert(kbDocuments).values(row),
    auditInsert(env, auth, {
      action: "knowledge_base.index",
      targetType: "knowledge_base",
      targetId: kb.id,
      details: { document_id: id, name: page.title, source: "url" },
    }),
  ]);
  return id;
}

/**
 * Indexes a url_data request's first page (and keeps the source when it is crawled on or
 * re-scraped). `index` is ingestion.service's indexOne, handed in so this module imports that
 * service's types only: the service calls this one, and a runtime import back would be a cycle.
 */
export async function indexUrlData(
  env: Env,
  auth: AuthContext,
  kb: KnowledgeBaseRow,
  urlData: UrlDataInput,
  settings: ChunkSettings,
  index: typeof indexOne,
  fetchOverride?: FetchFunction,
): Promise<string[]> {
  const { request, rescrape_frequency: frequency } = urlData;
  const limit = request.recursive ? (request.url_limit ?? URL_LIMIT_DEFAULT) : 1;
  if ((limit > 1 || frequency !== "Never") && (await indexStub(env, kb.id).webSourceCount()) >= MAX_WEB_SOURCES) {
    throw badRequest(
      `url_data: this knowledge base already keeps ${MAX_WEB_SOURCES} web sources that are crawled or re-scraped (the limit); index into another knowledge base, or send recursive false with rescrape_frequency Never`,
    );
  }
  const { page, state } = await startCrawl(request.url, limit, webFetch(env, fetchOverride));
  const base = {
    id: newId(),
    kbId: kb.id,
    orgId: kb.orgId,
    userId: auth.userId,
    url: request.url,
    returnType: request.return_type,
    limit,
    settings,
    frequency,
    contentDocument: null,
  };

  if (crawlFinished(state) || request.return_type === "CHUNKS") {
    const id = await index(env, auth, kb, pagesToDocuments([page], "CHUNKS")[0], settings);
    const finished = crawlFinished(state);
    if (!finished || frequency !== "Never") {
      const record: WebSourceRecord = {
        ...base,
        documents: finished ? { [page.url]: id } : {},
        crawl: finished ? null : state,
        crawlDocuments: finished ? {} : { [page.url]: id },
      };
      await indexStub(env, kb.id).registerWebSource(record, []);
    }
    return [id];
  }
  const id = await placeholderDocument(env, auth, kb, page);
  await indexStub(env, kb.id).registerWebSource(
    { ...base, documents: {}, crawl: state, crawlDocuments: {}, contentDocument: id },
    [{ url: page.url, title: page.title, markdown: page.markdown }],
  );
  return [id];
}
