import { describe, expect, it } from "vitest";
import { call } from "../helpers";

type Schema = { $ref?: string; properties?: Record<string, unknown> };
type Operation = {
  summary?: string;
  security?: unknown[];
  requestBody?: { content: Record<string, { schema: Schema }> };
};

describe("API documentation", () => {
  it("serves an OpenAPI 3.1 document built from the route schemas", async () => {
    const response = await call("/openapi.json");
    expect(response.status).toBe(200);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<string, Record<string, Operation>>;
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, Schema> };
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
    const create = doc.paths["/admin/connections/create"].post;
    expect(create.security).toEqual([{ bearer: [] }]);
    // The body is documented in every encoding Group B accepts, from the same zod schema that validates it.
    expect(Object.keys(create.requestBody?.content ?? {}).sort()).toEqual([
      "application/json",
      "application/x-www-form-urlencoded",
      "multipart/form-data",
    ]);
    const ref = create.requestBody?.content["application/json"].schema.$ref ?? "";
    expect(doc.components.schemas[ref.replace("#/components/schemas/", "")].properties).toHaveProperty("kind");
    expect(doc.paths["/auth/signup"].post.security).toEqual([]);
  });

  it("serves Swagger UI at /docs from Loom's own origin (no CDN, no inline script), its files as static assets", async () => {
    const response = await call("/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    // Swagger UI's icons are data: URLs: allowed for images on this page, and nothing else widened.
    const csp = response.headers.get("content-security-policy") ?? "";
    expect(csp.split("; ")).toEqual(
      expect.arrayContaining([
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "frame-ancestors 'none'",
      ]),
    );
    expect(csp.match(/data:/g)).toHaveLength(1);
    for (const other of ["/", "/openapi.json", "/docs/loom-docs.js", "/v1/knowledge-bases"])
      expect((await call(other)).headers.get("content-security-policy") ?? "", other).not.toContain("data:");
    const html = await response.text();
    // Works offline: every script and stylesheet is a same-origin path, and nothing runs inline.
    const sources = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(sources.length).toBeGreaterThanOrEqual(3);
    for (const source of sources) expect(source, source).toMatch(/^\/docs\//);
    expect(html).not.toMatch(/<script>(?!<\/script>)|<script(?![^>]*src=)[^>]*>[^<]/);
    expect(html).not.toContain("<style");
    for (const source of sources) {
      const asset = await call(source);
      expect(asset.status, source).toBe(200);
      expect((await asset.arrayBuffer()).byteLength, source).toBeGreaterThan(0);
    }
    const starter = await (await call("/docs/loom-docs.js")).text();
    expect(starter).toContain("/openapi.json");
    expect(await (await call("/docs/vendor/swagger-ui-bundle.js")).text()).toContain("SwaggerUIBundle");
    const missing = await call("/docs/vendor/nope.js");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: "no route for GET /docs/vendor/nope.js" });
  });
});
