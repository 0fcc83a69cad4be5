import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, call, json, seedOrg, type Org } from "../helpers";
import { AppError } from "../../src/lib/errors";
import { renderError } from "../../src/lib/render-error";
import { checkUrl, parseHostList } from "../../src/lib/ssrf-guard";
import { createConnection } from "../../src/features/connections/connections.service";
import { chatModelFor, embedderFor, rerankerFor } from "../../src/providers/registry";
import { connect, instant } from "./connect";
import { FakeNetwork, captureConsole, chunked, collect, openAiCompletion, sse } from "./fake-providers";
import { Hono } from "hono";
import type { AppBindings } from "../../src/env";

/**
 * Connections name the server their secret is sent to. Every spelling of this machine, the private
 * network and the cloud metadata address is refused when the URL is saved and again before each
 * request; only the operator's ALLOW_PRIVATE_MODEL_HOSTS list lets a local model server through.
 */

const SECRET = "sk-EGRESS-CANARY-5e1f0c9a77b3";

/** Spellings of loopback, private, link-local and local-name addresses; none is on the test list. */
const REFUSED = [
  "http://127.0.0.1/v1",
  "http://127.0.0.1:8080/v1",
  "https://127.0.0.1/v1",
  "http://127.1/v1",
  "http://0x7f000001/v1",
  "http://2130706433/v1",
  "http://0177.0.0.1/v1",
  "http://0x7f.1/v1",
  "https://%31%32%37.0.0.1/v1",
  "http://[::1]/v1",
  "http://[::ffff:127.0.0.1]/v1",
  "http://[0:0:0:0:0:0:0:1]:11434/v1",
  "http://[fe80::1]/v1",
  "http://[fd00::1]/v1",
  "http://169.254.169.254/latest/meta-data",
  "https://169.254.169.254/latest/meta-data",
  "http://100.100.100.200/latest/meta-data",
  "http://10.0.0.1/v1",
  "http://172.16.0.1/v1",
  "http://192.168.1.10:11434/v1",
  "http://0.0.0.0:11434/v1",
  "http://0/v1",
  "http://localhost:11434/v1",
  "https://localhost/v1",
  "https://LOCALHOST./v1",
  "https://ollama.localhost/v1",
  "https://metadata.google.internal/computeMetadata/v1",
  "https://printer.local/v1",
  "https://router.home.arpa/v1",
  "https://ollama/v1",
  "https://127.0.0.1.nip.io/v1",
  "https://app.127-0-0-1.sslip.io/v1",
  // A public host over plain http would carry the secret in the clear.
  "http://api.openai.com/v1",
];

async function read(response: Response): Promise<[number, Record<string, unknown>]> {
  return [response.status, (await response.json()) as Record<string, unknown>];
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

/** Renders an error the way the Worker's root handler does, for a Group A route. */
async function rendered(error: unknown): Promise<string> {
  const app = new Hono<AppBindings>();
  app.onError(renderError);
  app.get("/v1/probe", () => {
    throw error;
  });
  // The tests' LOG_LEVEL (off unless set): the failure line is expected, not worth printing.
  return (await app.request("/v1/probe", {}, env)).text();
}

const ownerAuth = (org: Org) => ({
  userId: org.owner.userId,
  orgId: org.orgId,
  role: "owner" as const,
  via: "token" as const,
});
const withHosts = (hosts: string) => ({ ...env, ALLOW_PRIVATE_MODEL_HOSTS: hosts });

describe("connections: base_url is checked when saved", () => {
  it("refuses every spelling of a loopback, private, link-local or local address at create and at update (422 naming base_url)", async () => {
    const org = await seedOrg();
    const auth = bearer(org.owner.token);
    await connect(org, { name: "ok", kind: "openai", base_url: "https://llm.example/v1" });
    for (const url of REFUSED) {
      const [status, body] = await read(
        await call(
          "/admin/connections/create",
          json({ name: "probe", kind: "openai", base_url: url, secret: SECRET }, auth),
        ),
      );
      expect(status, url).toBe(422);
      const issue = (body.detail as { loc: string[]; msg: string }[])[0];
      expect(issue.loc, url).toEqual(["body", "base_url"]);
      expect(issue.msg, url).toMatch(/^refused: .*ALLOW_PRIVATE_MODEL_HOSTS/);
      const [updateStatus] = await read(
        await call("/admin/connections/update", {
          ...json({ name: "ok", base_url: url, secret: SECRET }, auth),
          method: "PATCH",
        }),
      );
      expect(updateStatus, url).toBe(422);
    }
    const listed = await call("/admin/connections", { headers: auth });
    const connections = ((await listed.json()) as { connections: { name: string; baseUrl: string }[] }).connections;
    expect(connections.map((c) => [c.name, c.baseUrl])).toEqual([["ok", "https://llm.example/v1"]]);
  });

  it("the guard's own rules refuse the same spellings", () => {
    for (const url of REFUSED)
      expect(() => checkUrl(url, { publicHosts: true, trustedHosts: [] }), url).toThrow(/^refused to fetch: /);
    for (const url of ["https://api.openai.com/v1", "https://llm.example:8443/v1", "https://1password.com/"])
      expect(checkUrl(url, { publicHosts: true, trustedHosts: [] }).toString()).toBe(url);
  });

  it("asks for the secret again when the URL changes, so a stored secret cannot be redirected", async () => {
    const org = await seedOrg();
    const auth = bearer(org.owner.token);
    await connect(org, {
      name: "gw",
      kind: "openai",
      base_url: "https://gateway.example/acme/v1",
      secret: SECRET,
      chat_model: "m",
    });
    const patch = (body: Record<string, unknown>) =>
      call("/admin/connections/update", { ...json({ name: "gw", ...body }, auth), method: "PATCH" });
    for (const base_url of [
      "https://attacker.example/v1",
      "https://gateway.example/other-account/v1",
      "https://gateway.example:444/acme/v1",
    ]) {
      const [status, body] = await read(await patch({ base_url }));
      expect(status, base_url).toBe(422);
      expect(body).toEqual({
        detail: [
          {
            loc: ["body", "base_url"],
            msg: "changing the URL of a connection that has a secret needs the secret again: send `secret` (or `clear_secret: true` to drop it)",
            type: "value_error",
          },
        ],
      });
    }
    // Nothing changed, and the secret still goes only to the original URL.
    const net = new FakeNetwork().on("https://gateway.example/acme/v1/", () => openAiCompletion("ok"));
    await (await chatModelFor(env, org, "gw", { fetch: net.fetch })).complete({
      messages: [{ role: "user", content: "q" }],
    });
    expect(net.received.map((r) => [r.url, r.headers.authorization])).toEqual([
      ["https://gateway.example/acme/v1/chat/completions", `Bearer ${SECRET}`],
    ]);

    // The same URL with a trailing slash, or other fields, keep the secret.
    expect((await patch({ base_url: "https://gateway.example/acme/v1/", chat_model: "m2" })).status).toBe(200);
    const [, moved] = await read(await patch({ base_url: "https://attacker.example/v1", clear_secret: "true" }));
    expect(moved.connection).toMatchObject({
      baseUrl: "https://attacker.example/v1",
      hasSecret: false,
      secretLastFour: null,
    });
    const [, given] = await read(await patch({ base_url: "https://new.example/v1", secret: "sk-new-secret-9876" }));
    expect(given.connection).toMatchObject({
      baseUrl: "https://new.example/v1",
      hasSecret: true,
      secretLastFour: "9876",
    });
  });
});

describe("providers: every request goes through the guard", () => {
  it("refuses a stored private base_url before sending anything, so the secret never leaves", async () => {
    const org = await seedOrg();
    // Saved while the operator listed it; the operator has since removed it.
    await connect(org, {
      name: "was-local",
      kind: "openai",
      base_url: "http://127.0.0.1:11434/v1",
      secret: SECRET,
      chat_model: "m",
      embedding_model: "e",
    });
    // A row written before the guard existed.
    await connect(org, {
      name: "legacy",
      kind: "cohere",
      base_url: "https://rerank.example",
      secret: SECRET,
      rerank_model: "r",
    });
    await env.DB.prepare("UPDATE connections SET base_url = ? WHERE org_id = ? AND name = 'legacy'")
      .bind("https://169.254.169.254/latest", org.orgId)
      .run();
    const net = new FakeNetwork()
      .on("http://", () => openAiCompletion("leaked"))
      .on("https://", () => openAiCompletion("leaked"));

    const chat = await failure(
      chatModelFor(withHosts(""), org, "was-local", { fetch: net.fetch, ...instant }).then((m) =>
        m.complete({ messages: [{ role: "user", content: "q" }] }),
      ),
    );
    expect(chat.status).toBe(400);
    expect(chat.message).toBe(
      "connection 'was-local': refused to fetch: only https URLs are allowed (check its base_url)",
    );
    const stream = await failure(
      chatModelFor(withHosts(""), org, "was-local", { fetch: net.fetch }).then((m) =>
        collect(m.stream({ messages: [{ role: "user", content: "q" }] })),
      ),
    );
    expect(stream.status).toBe(400);
    expect(
      (await failure(embedderFor(withHosts(""), org, "was-local", { fetch: net.fetch }).then((e) => e.embed(["x"]))))
        .status,
    ).toBe(400);
    const rerank = await failure(
      rerankerFor(env, org, "legacy", { fetch: net.fetch }).then((r) => r.rerank("q", ["a"])),
    );
    expect(rerank.message).toBe(
      "connection 'legacy': refused to fetch: IP addresses are not allowed, only named hosts (check its base_url)",
    );
    expect(net.received).toEqual([]);
  });

  it("does not follow a redirect to a private address, and never carries the secret to another host", async () => {
    const org = await seedOrg();
    await connect(org, {
      name: "gw",
      kind: "openai",
      base_url: "https://gateway.example/v1",
      secret: SECRET,
      chat_model: "m",
    });
    const net = new FakeNetwork()
      .on(
        "https://gateway.example/v1/chat/completions",
        () =>
          new Response(null, { status: 307, headers: { location: "https://169.254.169.254/latest/meta-data/iam" } }),
      )
      .on("https://169.254.169.254/", () => new Response("role credentials"));
    const model = await chatModelFor(env, org, "gw", { fetch: net.fetch, ...instant });
    const error = (await captureConsole(() => model.complete({ messages: [{ role: "user", content: "q" }] })))
      .error as AppError;
    expect(error.status).toBe(502);
    expect(error.message).toBe(
      "the model provider openai (connection 'gw') failed: gateway.example answered 307 with a redirect Loom refused to follow (IP addresses are not allowed, only named hosts)",
    );
    expect(net.received.map((r) => r.host)).toEqual(["gateway.example"]);

    // A redirect to another public host is followed, without the credentials.
    const moved = new FakeNetwork()
      .on(
        "https://gateway.example/",
        () =>
          new Response(null, { status: 308, headers: { location: "https://elsewhere.example/v1/chat/completions" } }),
      )
      .on("https://elsewhere.example/", () => openAiCompletion("from elsewhere"));
    const followed = await (await chatModelFor(env, org, "gw", { fetch: moved.fetch })).complete({
      messages: [{ role: "user", content: "q" }],
    });
    expect(followed.text).toBe("from elsewhere");
    expect(moved.received.map((r) => [r.host, r.headers.authorization ?? null])).toEqual([
      ["gateway.example", `Bearer ${SECRET}`],
      ["elsewhere.example", null],
    ]);
    expect(moved.received[1]?.json?.model).toBe("m");
  });

  it("a 502 names the provider and status, never the upstream body", async () => {
    const org = await seedOrg();
    const leak = "UPSTREAM-BODY root:x:0:0:root:/root:/bin/bash";
    await connect(org, {
      name: "gw",
      kind: "openai",
      base_url: "https://gateway.example/v1",
      secret: SECRET,
      chat_model: "m",
      embedding_model: "e",
    });
    await connect(org, {
      name: "claude",
      kind: "anthropic",
      base_url: "https://claude-proxy.example",
      secret: SECRET,
      chat_model: "c",
    });
    await connect(org, {
      name: "cf",
      kind: "workers_ai",
      secret: SECRET,
      settings: { account_id: "acct" },
      chat_model: "@cf/m",
    });
    const net = new FakeNetwork()
      .on("https://gateway.example/v1/chat/completions", () => new Response(leak, { status: 500 }))
      .on("https://gateway.example/v1/embeddings", () => Response.json({ error: { message: leak } }, { status: 400 }))
      .on("https://claude-proxy.example/", () =>
        chunked([sse([{ event: "error", data: { type: "error", error: { type: leak, message: leak } } }])]),
      )
      .on("https://api.cloudflare.com/", () =>
        Response.json({ success: false, errors: [{ code: 7000, message: leak }] }),
      );
    const attempts = [
      await captureConsole(async () =>
        (await chatModelFor(env, org, "gw", { fetch: net.fetch, ...instant })).complete({
          messages: [{ role: "user", content: "q" }],
        }),
      ),
      await captureConsole(async () =>
        (await embedderFor(env, org, "gw", { fetch: net.fetch, ...instant })).embed(["x"]),
      ),
      await captureConsole(async () =>
        collect(
          (await chatModelFor(env, org, "claude", { fetch: net.fetch, ...instant })).stream({
            messages: [{ role: "user", content: "q" }],
          }),
        ),
      ),
      await captureConsole(async () =>
        (await chatModelFor(env, org, "cf", { fetch: net.fetch, ...instant })).complete({
          messages: [{ role: "user", content: "q" }],
        }),
      ),
    ];
    const messages = attempts.map((a) => (a.error as AppError).message);
    expect(messages).toEqual([
      "the model provider openai (connection 'gw') failed: HTTP 500",
      "the model provider openai (connection 'gw') failed: HTTP 400 (the provider refused the request)",
      "the model provider anthropic (connection 'claude') failed: the stream reported an error",
      "the model provider workers_ai (connection 'cf') failed: the call did not succeed (error 7000)",
    ]);
    for (const attempt of attempts) {
      const body = await rendered(attempt.error);
      expect(body).not.toContain("UPSTREAM-BODY");
      expect(body).not.toContain("root:x");
      for (const line of attempt.lines) expect(line).not.toContain(SECRET);
    }
  });

  it("caps the size of a provider's answer", async () => {
    const org = await seedOrg();
    await connect(org, {
      name: "gw",
      kind: "openai",
      base_url: "https://gateway.example/v1",
      secret: SECRET,
      chat_model: "m",
    });
    // Streamed without a length, as a chunked answer would be: the cap counts what arrives.
    const net = new FakeNetwork().on("https://gateway.example/", () =>
      chunked(
        Array.from({ length: 17 }, () => " ".repeat(1024 * 1024)),
        "application/json",
      ),
    );
    const error = await failure(
      (await chatModelFor(env, org, "gw", { fetch: net.fetch, ...instant })).complete({
        messages: [{ role: "user", content: "q" }],
      }),
    );
    expect(error.status).toBe(502);
    expect(error.message).toBe(
      "the model provider openai (connection 'gw') failed: the answer from gateway.example exceeded 16777216 bytes",
    );
  });
});

describe("ALLOW_PRIVATE_MODEL_HOSTS: the operator's local model servers", () => {
  it("lets exactly the listed host and port through, over http, at create and at request time", async () => {
    const org = await seedOrg();
    const local = withHosts("localhost:11434, gpu-box.lan:8000");
    const input = {
      name: "ollama",
      kind: "openai" as const,
      base_url: "http://localhost:11434/v1",
      chat_model: "llama3.2",
    };
    expect((await failure(createConnection(env, ownerAuth(org), input))).status).toBe(422);
    const created = await createConnection(local, ownerAuth(org), input);
    expect(created.baseUrl).toBe("http://localhost:11434/v1");
    for (const base_url of [
      "http://localhost:8080/v1",
      "http://127.0.0.1:11434/v1",
      "http://gpu-box.lan/v1",
      "http://other.lan:8000/v1",
      "http://169.254.169.254/",
    ]) {
      expect(
        (await failure(createConnection(local, ownerAuth(org), { ...input, name: "other", base_url }))).status,
        base_url,
      ).toBe(422);
    }
    const net = new FakeNetwork().on("http://localhost:11434/v1/", () => openAiCompletion("local answer"));
    expect(
      (
        await (
          await chatModelFor(local, org, "ollama", { fetch: net.fetch })
        ).complete({ messages: [{ role: "user", content: "q" }] })
      ).text,
    ).toBe("local answer");
    // Without the operator's entry, the same connection is refused before anything is sent.
    expect(
      (
        await failure(
          chatModelFor(env, org, "ollama", { fetch: net.fetch }).then((m) =>
            m.complete({ messages: [{ role: "user", content: "q" }] }),
          ),
        )
      ).status,
    ).toBe(400);
    expect(net.received).toHaveLength(1);
  });

  it("reads host[:port] entries in any spelling into one canonical form; anything else trusts nothing", () => {
    expect(
      parseHostList(" localhost:11434 , *.lan ,127.1:8000 [::1]:9000,LLM.Example, http://x/, user@host, "),
    ).toEqual(["localhost:11434", "*.lan", "127.0.0.1:8000", "[::1]:9000", "llm.example"]);
    expect(parseHostList(undefined)).toEqual([]);
    expect(parseHostList("true")).toEqual(["true"]);
    expect(() => checkUrl("https://localhost/v1", { publicHosts: true, trustedHosts: parseHostList("true") })).toThrow(
      /local or private name/,
    );
  });
});
