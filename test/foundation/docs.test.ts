import { describe, expect, it } from "vitest";
import { call } from "../helpers";

type Schema = { $ref?: string; properties?: Record<string, unknown> };
type Operation = { summary?: string; security?: unknown[]; requestBody?: { content: Record<string, { schema: Schema }> } };

describe("API documentation", () => {
  it("serves an OpenAPI 3.1 document built from the route schemas", async () => {
    const response = await call("/openapi.json");
    expect(response.status).toBe(200);
    const doc = (await response.json()) as { openapi: string; paths: Record<string, Record<string, Operation>>; components: { securitySchemes: Record<string, unknown>; schemas: Record<string, Schema> } };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
    const create = doc.paths["/admin/connections/create"].post;
    expect(create.security).toEqual([{ bearer: [] }]);
    // The body is documented in every encoding Group B accepts, from the same zod schema that validates it.
    expect(Object.keys(create.requestBody?.content ?? {}).sort()).toEqual(["application/json", "application/x-www-form-urlencoded", "multipart/form-data"]);
    const ref = create.requestBody?.content["application/json"].schema.$ref ?? "";
    expect(doc.components.schemas[ref.replace("#/components/schemas/", "")].properties).toHaveProperty("kind");
    expect(doc.paths["/auth/signup"].post.security).toEqual([]);
  });

  it("serves a self-contained interactive reference page at /docs", async () => {
    const response = await call("/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    const html = await response.text();
    expect(html).toContain("/openapi.json");
    expect(html).toContain("Send request");
    // No third-party scripts: it must work offline.
    expect(html).not.toMatch(/<script[^>]+src=/);
  });
});
