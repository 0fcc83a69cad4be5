import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { AppError } from "../../lib/errors";
import { DOCS_PAGE } from "./docs-page";
import { GroupAError, GroupBError, HTTPValidationError, Unauthorized } from "../../lib/route-responses";

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
  // The error bodies are components by name even where a route set does not reach one of them.
  for (const [name, schema] of Object.entries({ GroupAError, Unauthorized, GroupBError, HTTPValidationError })) app.openAPIRegistry.register(name, schema);
  app.get("/openapi.json", (c) => c.json(app.getOpenAPI31Document(OPENAPI_INFO)));
  app.get("/docs", (c) => c.html(DOCS_PAGE));
  // The renderer's files (wrangler.toml [assets]); only GET, only under /docs/.
  app.get("/docs/*", async (c) => {
    if (!c.env.ASSETS) throw new AppError("unavailable", "the docs assets are not configured (run npm run build)");
    const response = await c.env.ASSETS.fetch(c.req.raw);
    if (response.status === 404) throw new AppError("not_found", `no route for GET ${c.req.path}`);
    // The binding's headers are immutable; middleware (request id, security headers) adds its own.
    return new Response(response.body, response);
  });
}
