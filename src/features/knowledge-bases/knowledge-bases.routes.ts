import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { CreatedId, Success } from "../../lib/response-schemas";
import {
  DocumentIds,
  DocumentList,
  KnowledgeBaseFetched,
  KnowledgeBaseList,
  KnowledgeBaseQueryAnswer,
} from "./knowledge-bases.responses";
import { FetchQuery, ListQuery, listEnvelope } from "../../lib/ownership";
import {
  DocumentsDeleteQuery,
  DocumentsListQuery,
  IndexBody,
  KnowledgeBaseCreateBody,
  KnowledgeBaseParams,
  QueryBody,
} from "./knowledge-bases.schemas";
import {
  createKnowledgeBase,
  deleteDocuments,
  deleteKnowledgeBase,
  fetchKnowledgeBase,
  listDocuments,
  listKnowledgeBases,
  parseDocumentIds,
} from "./knowledge-bases.service";
import { indexIntoKnowledgeBase } from "./index-request";
import { prefetchedKnowledgeBases, selectKnowledgeBaseById } from "./index-lookup";
import type { Prefetch } from "../../middleware/auth";

/** The knowledge base named by the path, read in the API key's D1 statement (index-lookup.ts). */
const prefetchKnowledgeBase: Prefetch = { select: selectKnowledgeBaseById, rows: prefetchedKnowledgeBases };
import { queryWithModelOptions } from "./options/knowledge-base-query";

export function registerKnowledgeBaseRoutes(app: OpenAPIHono<AppBindings>): void {
  const tags = ["Knowledge bases"];
  const common = { group: "A", auth: "api_key", tags } as const;

  defineRoute(
    app,
    {
      ...common,
      method: "post",
      path: "/v1/knowledge-base",
      response: CreatedId,
      summary: "Create a knowledge base",
      body: KnowledgeBaseCreateBody,
      responses: { 403: "Viewers cannot create", 409: "You already have a knowledge base with that name" },
    },
    async (c, { body }) => c.json({ status: "success", id: await createKnowledgeBase(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "get",
      path: "/v1/knowledge-base",
      response: KnowledgeBaseFetched,
      summary: "Fetch a knowledge base by id or name",
      query: FetchQuery,
      responses: { 404: "No such knowledge base" },
    },
    async (c, { query }) =>
      c.json({ status: "success", object: await fetchKnowledgeBase(c.env, c.get("auth"), query) }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "get",
      path: "/v1/knowledge-bases",
      response: KnowledgeBaseList,
      summary: "List knowledge bases",
      query: ListQuery,
    },
    async (c, { query }) =>
      c.json(listEnvelope(await listKnowledgeBases(c.env, c.get("auth"), query.include_shared), query.verbose)),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "delete",
      path: "/v1/knowledge-base/:id",
      response: Success,
      summary: "Delete a knowledge base with its documents, chunks, vectors and files",
      params: KnowledgeBaseParams,
      responses: { 403: "Not yours to change", 404: "No such knowledge base" },
    },
    async (c, { params }) => {
      await deleteKnowledgeBase(c.env, c.get("auth"), params.id);
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...common,
      method: "get",
      path: "/v1/knowledge-base/:id/documents",
      response: DocumentList,
      summary: "List or find a knowledge base's documents with their indexing state",
      description:
        "Answers `document_ids` (what the hosted SDK's `find_documents` returns) and the `documents` themselves, newest first.",
      params: KnowledgeBaseParams,
      query: DocumentsListQuery,
      responses: { 404: "No such knowledge base" },
    },
    async (c, { params, query }) => {
      const list = await listDocuments(c.env, c.get("auth"), params.id, query);
      return c.json({ status: "success", document_ids: list.documents.map((d) => d._id), ...list });
    },
  );

  defineRoute(
    app,
    {
      ...common,
      method: "delete",
      path: "/v1/knowledge-base/:id/documents",
      response: DocumentIds,
      summary: "Remove documents and their chunks",
      params: KnowledgeBaseParams,
      query: DocumentsDeleteQuery,
      responses: { 403: "Not yours to change", 404: "No such knowledge base or document" },
    },
    async (c, { params, query }) =>
      c.json({
        status: "success",
        document_ids: await deleteDocuments(c.env, c.get("auth"), params.id, parseDocumentIds(query.document_ids)),
      }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "post",
      path: "/v1/knowledge-base/:id/index",
      prefetch: prefetchKnowledgeBase,
      response: DocumentIds,
      summary: "Index a file, web pages (url_data), an encyclopedia article, a video transcript or a preprint",
      params: KnowledgeBaseParams,
      body: IndexBody,
      responses: {
        403: "Not yours to change",
        404: "No such knowledge base",
        413: "File or page too large",
        502: "The outside source failed",
      },
    },
    async (c, { params, body }) =>
      c.json({
        status: "success",
        document_ids: await indexIntoKnowledgeBase(c.env, c.get("auth"), params.id, body, {
          fetch: c.get("deps").fetch,
          prefetched: c.get("prefetched"),
        }),
      }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "post",
      path: "/v1/knowledge-base/:id/query",
      prefetch: prefetchKnowledgeBase,
      response: KnowledgeBaseQueryAnswer,
      summary: "Query a knowledge base (keyword, vector or hybrid)",
      params: KnowledgeBaseParams,
      body: QueryBody,
      responses: { 404: "No such knowledge base", 502: "A model provider failed" },
    },
    async (c, { params, body }) =>
      c.json({
        status: "success",
        result: await queryWithModelOptions(
          c.env,
          c.get("auth"),
          params.id,
          body,
          c.get("deps").providers,
          c.get("prefetched"),
        ),
      }),
  );
}
