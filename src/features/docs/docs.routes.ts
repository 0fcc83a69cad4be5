import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { cspHash, setPagePolicy, type PagePolicy } from "../../middleware/security-headers";
import { DOCS_PAGE, DOCS_SCRIPT, DOCS_STYLE } from "./docs-page";

export const OPENAPI_INFO = {
  openapi: "3.1.0",
  info: {
    title: "Loom API",
    version: "0.1.0",
    description:
      "Group A is the public API under /v1 (API key as bearer). Group B is the application backend at the root (access token or API key). Group A bodies may be JSON, multipart/form-data or x-www-form-urlencoded.",
  },
};

let docsPolicy: Promise<PagePolicy> | undefined;

/** The docs page runs its one inline script and style (allowed by hash) and fetches only from Loom itself. */
function docsPagePolicy(): Promise<PagePolicy> {
  docsPolicy ??= Promise.all([cspHash(DOCS_SCRIPT), cspHash(DOCS_STYLE)]).then(([script, style]) => ({ scripts: [script], styles: [style], connect: ["'self'"] }));
  return docsPolicy;
}

export function registerDocsRoutes(app: OpenAPIHono<AppBindings>): void {
  app.get("/openapi.json", (c) => c.json(app.getOpenAPI31Document(OPENAPI_INFO)));
  app.get("/docs", async (c) => {
    setPagePolicy(c, await docsPagePolicy());
    return c.html(DOCS_PAGE);
  });
}
