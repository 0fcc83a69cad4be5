import { env } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { renderError } from "../../src/lib/render-error";
import type { AppBindings } from "../../src/env";
import { chatModelFor, embedderFor, rerankerFor } from "../../src/providers/registry";
import { connect, instant } from "./connect";
import {
  FakeNetwork,
  anthropicMessage,
  captureConsole,
  chunked,
  cohereRerank,
  collect,
  openAiCompletion,
  sse,
} from "./fake-providers";
import { setIsolateLogLevel } from "../../src/lib/log";

const CANARY = "sk-CANARY-7f3a9c2e5b1d4088";

/** Renders an error the way the Worker's root handler does, for a Group A route. */
async function rendered(error: unknown): Promise<{ status: number; body: string }> {
  const app = new Hono<AppBindings>();
  app.onError(renderError);
  app.get("/v1/probe", () => {
    throw error;
  });
  // The tests' LOG_LEVEL (off unless set): the failure line is expected, not worth printing.
  const response = await app.request("/v1/probe", {}, env);
  return { status: response.status, body: await response.text() };
}

describe("providers: secrets reach only their own provider", () => {
  it("sends each connection's secret to its provider and nowhere else", async () => {
    const org = await seedOrg();
    const secrets = {
      openai: "sk-only-for-openai-1111",
      anthropic: "sk-ant-only-for-anthropic-2222",
      cohere: "co-only-for-cohere-3333",
    };
    await connect(org, { name: "openai", kind: "openai", secret: secrets.openai });
    await connect(org, { name: "claude", kind: "anthropic", secret: secrets.anthropic, chat_model: "claude-x" });
    await connect(org, { name: "cohere", kind: "cohere", secret: secrets.cohere });
    const net = new FakeNetwork()
      .on("https://api.openai.com/", () => openAiCompletion("a"))
      .on("https://api.anthropic.com/", () => anthropicMessage("b"))
      .on("https://api.cohere.com/", cohereRerank);
    await (await chatModelFor(env, org, "openai/gpt-4o-mini", { fetch: net.fetch })).complete({
      messages: [{ role: "user", content: "q" }],
    });
    await (await chatModelFor(env, org, "claude", { fetch: net.fetch })).complete({
      messages: [{ role: "user", content: "q" }],
    });
    await (await rerankerFor(env, org, "cohere", { fetch: net.fetch })).rerank("q", ["d"]);

    const owners: Record<string, string> = {
      "api.openai.com": secrets.openai,
      "api.anthropic.com": secrets.anthropic,
      "api.cohere.com": secrets.cohere,
    };
    expect(net.received.map((r) => r.host).sort()).toEqual(Object.keys(owners).sort());
    for (const request of net.received) {
      const seen = JSON.stringify(request.headers) + request.body;
      for (const [host, secret] of Object.entries(owners)) {
        if (host === request.host) expect(seen).toContain(secret);
        else expect(seen).not.toContain(secret);
      }
      // Secrets travel in headers only, never in the body.
      expect(request.body).not.toContain(owners[request.host] ?? "none");
    }
  });

  it("keeps a canary key out of every error message, rendered body and log line, even when the provider echoes it", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: CANARY, embedding_model: "e" });
    await connect(org, { name: "claude", kind: "anthropic", secret: CANARY, chat_model: "c" });
    const net = new FakeNetwork()
      .on("https://api.openai.com/v1/chat/completions", (r) =>
        Response.json(
          { error: { message: `Incorrect API key provided: ${r.headers.authorization}` } },
          { status: 401 },
        ),
      )
      .on(
        "https://api.openai.com/v1/embeddings",
        () => new Response(`upstream exploded; key=${CANARY.slice(0, 12)}*** full ${CANARY}`, { status: 500 }),
      )
      .on("https://api.anthropic.com/", () =>
        chunked([
          sse([
            { event: "error", data: { type: "error", error: { type: "api_error", message: `bad key ${CANARY}` } } },
          ]),
        ]),
      );

    // One at a time: each capture swaps the console, so overlapping captures would miss lines.
    // Tests run with LOG_LEVEL off; the failure lines are raised here so their content is checked.
    setIsolateLogLevel("warn");
    const attempts = [
      await captureConsole(async () =>
        (await chatModelFor(env, org, "openai/gpt-4o", { fetch: net.fetch, ...instant })).complete({
          messages: [{ role: "user", content: "q" }],
        }),
      ),
      await captureConsole(async () =>
        (await embedderFor(env, org, "openai", { fetch: net.fetch, ...instant })).embed(["x"]),
      ),
      await captureConsole(async () =>
        collect(
          (await chatModelFor(env, org, "claude", { fetch: net.fetch, ...instant })).stream({
            messages: [{ role: "user", content: "q" }],
          }),
        ),
      ),
    ];
    setIsolateLogLevel(env.LOG_LEVEL);
    for (const attempt of attempts) {
      const { status, body } = await rendered(attempt.error);
      expect(status).toBe(502);
      expect(JSON.parse(body)).toMatchObject({ status: "failed" });
      expect(body).toMatch(/the model provider (openai|anthropic) \(connection '(openai|claude)'\) failed/);
      for (const text of [body, String((attempt.error as Error).message), ...attempt.lines]) {
        expect(text).not.toContain(CANARY);
        expect(text).not.toContain(CANARY.slice(0, 12));
      }
    }
    expect(attempts.flatMap((a) => a.lines).length).toBeGreaterThan(0);
  });

  it("uses a per-request reranking api_key for that call only: scrubbed from errors, never stored", async () => {
    const org = await seedOrg();
    const net = new FakeNetwork().on("https://api.cohere.com/", (r) =>
      Response.json({ message: `invalid api token ${r.headers.authorization?.slice(7)}` }, { status: 401 }),
    );
    const { error, lines } = await captureConsole(async () =>
      (await rerankerFor(env, org, "cohere/rerank-v3.5", { apiKey: CANARY, fetch: net.fetch, ...instant })).rerank(
        "q",
        ["a"],
      ),
    );
    expect(net.received[0]?.headers.authorization).toBe(`Bearer ${CANARY}`);
    expect(net.received[0]?.json?.model).toBe("rerank-v3.5");
    const { status, body } = await rendered(error);
    expect(status).toBe(502);
    expect(body).toBe(
      JSON.stringify({
        status: "failed",
        error:
          "the model provider cohere (connection 'request') failed: HTTP 401 (the provider refused the credentials)",
      }),
    );
    for (const line of lines) expect(line).not.toContain(CANARY);
    // Nothing of the request key lands in the database: no connection, no audit entry.
    for (const table of ["connections", "audit_log"]) {
      const exists = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?")
        .bind(table)
        .first();
      if (!exists) continue;
      const rows = await env.DB.prepare(`SELECT * FROM ${table}`).all();
      expect(JSON.stringify(rows.results)).not.toContain(CANARY);
    }
  });
});

describe("providers: tenancy", () => {
  it("never lets one organization use another's connection, by name or by default", async () => {
    const owner = await seedOrg();
    const other = await seedOrg();
    await connect(owner, { name: "private-llm", kind: "openai", secret: "sk-tenant-a-9999", chat_model: "m" });
    const net = new FakeNetwork().on("https://api.openai.com/", () => openAiCompletion("leak"));
    const byName = await chatModelFor(env, other, "private-llm/m", { fetch: net.fetch }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(byName?.message).toBe("model 'private-llm/m': this organization has no connection named 'private-llm'");
    const byDefault = await chatModelFor(env, other, undefined, { fetch: net.fetch, allowExtractive: true });
    expect(byDefault.model).toBe("loom/extractive");
    expect(net.received).toHaveLength(0);
  });
});
