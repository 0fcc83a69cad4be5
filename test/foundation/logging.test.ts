import { afterEach, describe, expect, it, vi } from "vitest";
import { Hono } from "hono";
import { env } from "cloudflare:test";
import type { AppBindings } from "../../src/env";
import { renderError } from "../../src/lib/render-error";
import { requestId } from "../../src/middleware/request-id";
import { accessLog } from "../../src/middleware/access-log";
import { logEvent, setIsolateLogLevel } from "../../src/lib/log";
import { bearer, callWith, json, seedOrg } from "../helpers";

type Line = Record<string, unknown>;

/** Every JSON line written to the console while `fn` runs. */
async function captured(fn: () => Promise<unknown>): Promise<{ lines: Line[]; raw: string }> {
  const written: string[] = [];
  for (const method of ["log", "warn", "error"] as const)
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void written.push(args.map(String).join(" ")));
  await fn();
  vi.restoreAllMocks();
  const lines = written.flatMap((text) => {
    try {
      return [JSON.parse(text) as Line];
    } catch {
      return [];
    }
  });
  return { lines, raw: written.join("\n") };
}

afterEach(() => vi.restoreAllMocks());

describe("logging: one structured line per request, one per failure", () => {
  it("logs request id, method, route pattern, status, ms and organization, and never the credential", async () => {
    const org = await seedOrg();
    const created = await callWith({}, "/v1/knowledge-base", json({ name: "logged" }, bearer(org.owner.apiKey)));
    const { id } = (await created.json()) as { id: string };
    let response: Response | undefined;
    const { lines, raw } = await captured(async () => {
      response = await callWith({ LOG_LEVEL: "info" }, `/v1/knowledge-base/${id}/documents`, {
        headers: bearer(org.owner.apiKey),
      });
    });
    const requests = lines.filter((line) => line.event === "request");
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      level: "info",
      method: "GET",
      route: "/v1/knowledge-base/:id/documents",
      status: 200,
      org_id: org.orgId,
      request_id: response?.headers.get("x-request-id"),
    });
    expect(typeof requests[0].ms).toBe("number");
    // The pattern, not the path; and no secret of any kind.
    expect(raw).not.toContain(id);
    expect(raw).not.toContain(org.owner.apiKey);
  });

  it("LOG_LEVEL drops the lines below it", async () => {
    const org = await seedOrg();
    const quiet = await captured(() =>
      callWith({ LOG_LEVEL: "warn" }, "/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) }),
    );
    expect(quiet.lines.filter((line) => line.event === "request")).toEqual([]);
    const loud = await captured(() =>
      callWith({ LOG_LEVEL: "debug" }, "/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) }),
    );
    expect(loud.lines.filter((line) => line.event === "request")).toHaveLength(1);
  });

  it("failures logged where no env is at hand (provider clients, pipeline nodes, the parser host) follow LOG_LEVEL too", async () => {
    const org = await seedOrg();
    try {
      // Each entry point sets the isolate's level from its env: here a request with LOG_LEVEL=error.
      await callWith({ LOG_LEVEL: "error" }, "/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) });
      const below = await captured(async () => logEvent("warn", "provider_failed", { provider: "openai" }));
      expect(below.raw).toBe("");
      const at = await captured(async () => logEvent("error", "pipeline_node_failed", { cause: ["Error: x"] }));
      expect(at.lines).toEqual([{ level: "error", event: "pipeline_node_failed", cause: ["Error: x"] }]);
      setIsolateLogLevel("off");
      expect((await captured(async () => logEvent("error", "pipeline_node_failed", {}))).raw).toBe("");
    } finally {
      setIsolateLogLevel(env.LOG_LEVEL);
    }
  });

  it("an unexpected error logs its cause chain and answers a reference the log can be searched by", async () => {
    const app = new Hono<AppBindings>();
    app.use("*", requestId);
    app.use("*", accessLog);
    app.onError(renderError);
    app.get("/boom/:id", () => {
      throw new Error("could not read the index", { cause: new TypeError("Network connection lost") });
    });
    let response: Response | undefined;
    const { lines } = await captured(async () => {
      response = await app.fetch(new Request("http://loom.test/boom/abc"), { ...env, LOG_LEVEL: "info" });
    });
    const reference = response?.headers.get("x-request-id") ?? "missing";
    expect(response?.status).toBe(500);
    expect(await response?.json()).toEqual({
      detail: `internal server error; reference ${reference} in the server log`,
    });
    const failure = lines.find((line) => line.event === "failure");
    expect(failure).toMatchObject({
      level: "error",
      request_id: reference,
      route: "/boom/:id",
      status: 500,
      cause: ["Error: could not read the index", "TypeError: Network connection lost"],
    });
    expect(lines.find((line) => line.event === "request")).toMatchObject({
      level: "error",
      status: 500,
      route: "/boom/:id",
    });
  });

  it("every response carries x-request-id: a fresh id, or the caller's own when it is a plain token", async () => {
    const app = new Hono<AppBindings>();
    app.use("*", requestId);
    // A handler answering a Response it built itself (as streaming answers do) still gets the header.
    app.get("/raw", (c) => new Response(c.get("requestId")));
    const fresh = await app.fetch(new Request("http://loom.test/raw"), env);
    expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f]{24}$/);
    expect(await fresh.text()).toBe(fresh.headers.get("x-request-id"));
    const traced = await app.fetch(
      new Request("http://loom.test/raw", { headers: { "x-request-id": "trace-0123_abc" } }),
      env,
    );
    expect(traced.headers.get("x-request-id")).toBe("trace-0123_abc");
    // Anything else (a space, a quote, too long) is replaced, so a log line cannot be forged through it.
    for (const hostile of ["a b", 'x"}', "y".repeat(65)]) {
      const replaced = await app.fetch(
        new Request("http://loom.test/raw", { headers: { "x-request-id": hostile } }),
        env,
      );
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f]{24}$/);
    }
  });
});
