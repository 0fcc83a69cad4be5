import { describe, expect, it } from "vitest";
import { call } from "../helpers";

describe("the landing page at /", () => {
  it("answers a browser with a small HTML page linking to /docs", async () => {
    const response = await call("/", { headers: { accept: "text/html,application/xhtml+xml,*/*;q=0.8" } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    const html = await response.text();
    expect(html).toContain('href="/docs"');
    expect(html).toContain("/auth/signup");
  });

  it("answers other clients (curl) with the same signposts as JSON", async () => {
    const response = await call("/", { headers: { accept: "*/*" } });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { docs: string; openapi: string; first_steps: string[] };
    expect(body.docs).toBe("/docs");
    expect(body.openapi).toBe("/openapi.json");
    expect(body.first_steps.join(" ")).toContain("/auth/api-keys");
  });
});
