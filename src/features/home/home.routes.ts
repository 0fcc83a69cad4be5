import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppBindings } from "../../env";

/**
 * `/`: what someone who just ran `npm start` opens first. Browsers get a small page, other clients
 * (curl, scripts) the same facts as JSON. Not in /openapi.json: it is a signpost, not API.
 */
const FIRST_STEPS = [
  "POST /auth/signup with JSON {email, password, organization} answers an access_token",
  "POST /auth/api-keys with `authorization: Bearer <access_token>` and {name} answers a key (sk_...) for /v1",
  'POST /v1/knowledge-base with `authorization: Bearer <key>` creates a knowledge base; README.md, "A first session", goes on to a document and a query',
] as const;

function wantsHtml(c: Context<AppBindings>): boolean {
  const accept = c.req.header("accept") ?? "";
  return accept.includes("text/html");
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Loom</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .25rem}</style>
</head><body>
<h1>Loom is running</h1>
<p>Knowledge bases, transformations, pipelines, chatbots and agents over one API.</p>
<p><a href="/docs">API reference (/docs)</a> · <a href="/openapi.json">OpenAPI document</a></p>
<h2>First steps</h2>
<ol>${FIRST_STEPS.map((step) => `<li>${escapeHtml(step)}</li>`).join("")}</ol>
<p>A deployed chatbot answers visitors at <code>/chat/&lt;chatbot id&gt;</code>.</p>
</body></html>`;

export function registerHomeRoutes(app: OpenAPIHono<AppBindings>): void {
  app.get("/", (c) => {
    if (wantsHtml(c)) return c.html(PAGE);
    return c.json({ name: "Loom", docs: "/docs", openapi: "/openapi.json", first_steps: FIRST_STEPS });
  });
}
