import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { DOCS_PAGE } from "./docs-page";

export const OPENAPI_INFO = {
  openapi: "3.1.0",
  info: {
    title: "Loom API",
    version: "0.1.0",
    description:
      "Group A is the public API under /v1 (API key as bearer). Group B is the application backend at the root (access token or API key). Group A bodies may be JSON, multipart/form-data or x-www-form-urlencoded.",
  },
};

export function registerDocsRoutes(app: OpenAPIHono<AppBindings>): void {
  app.get("/openapi.json", (c) => c.json(app.getOpenAPI31Document(OPENAPI_INFO)));
  app.get("/docs", (c) => c.html(DOCS_PAGE));
}
