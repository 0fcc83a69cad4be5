import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { AppError } from "../../lib/errors";
import { setPagePolicy } from "../../middleware/security-headers";
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

/**
 * The /docs page's policy: scripts, styles and fetches from Loom's own origin only. Images may
 * also be `data:` URLs, on this page only: Swagger UI's stylesheet draws its icons (the lock,
 * the arrows, the copy button) as inline SVG data URLs. No other page's policy allows `data:`.
 */
export const DOCS_PAGE_POLICY = {
  scripts: ["'self'"],
  styles: ["'self'"],
  images: ["'self'", "data:"],
  connect: ["'self'"],
};

/** The chat widget's files (scripts/build-web.mjs), in the same [assets] directory as /docs/*. */
const WIDGET_ASSETS = ["/widget.js", "/chat.js", "/chat.css"] as const;

export function registerDocsRoutes(app: OpenAPIHono<AppBindings>): void {
  // The error bodies are components by name even where a route set does not reach one of them.
  for (const [name, schema] of Object.entries({ GroupAError, Unauthorized, GroupBError, HTTPValidationError }))
    app.openAPIRegistry.register(name, schema);
  app.get("/openapi.json", (c) => c.json(app.getOpenAPI31Document(OPENAPI_INFO)));
  // Swagger UI has no inline script or style: its own files, on Loom's origin, are all it loads,
  // and it fetches /openapi.json and the requests "Try it out" sends from the same origin.
  app.get("/docs", (c) => {
    setPagePolicy(c, DOCS_PAGE_POLICY);
    return c.html(DOCS_PAGE);
  });
  // The renderer's files (wrangler.toml [assets]); only GET, only under /docs/.
  app.get("/docs/*", async (c) => {
    if (!c.env.ASSETS) throw new AppError("unavailable", "the docs assets are not configured (run npm run build)");
    const response = await c.env.ASSETS.fetch(c.req.raw);
    if (response.status === 404) throw new AppError("not_found", `no route for GET ${c.req.path}`);
    // The binding's headers are immutable; middleware (request id, security headers) adds its own.
    return new Response(response.body, response);
  });
  // wrangler.toml's run_worker_first sends every request to the Worker first, so the widget's
  // files are handed to the same binding. /widget.js is embedded by other sites' pages, so it may
  // be loaded cross-origin.
  for (const path of WIDGET_ASSETS) {
    app.get(path, async (c) => {
      if (!c.env.ASSETS) throw new AppError("unavailable", "the widget assets are not configured (run npm run build)");
      const response = await c.env.ASSETS.fetch(c.req.raw);
      if (response.status === 404) throw new AppError("not_found", `no route for GET ${c.req.path}`);
      const copy = new Response(response.body, response);
      if (path === "/widget.js") copy.headers.set("cross-origin-resource-policy", "cross-origin");
      return copy;
    });
  }
}
