import { describe, expect, it } from "vitest";
import { env } from "cloudflare:test";
import { sign } from "hono/jwt";
import { Hono } from "hono";
import { TOKEN_AUDIENCE } from "../../src/lib/signed-token";
import type { AppBindings } from "../../src/env";
import { securityHeaders, setPagePolicy } from "../../src/middleware/security-headers";
import { bearer, call, callWith, form, json, seedOrg } from "../helpers";
import { countingBody, MiB } from "../streamed-body";

type Json = Record<string, unknown>;
const read = async (response: Response): Promise<[number, Json]> => [response.status, (await response.json()) as Json];

describe("foundation: security", () => {
  it("Group B routes answer 401 for missing, malformed, forged and expired credentials", async () => {
    const org = await seedOrg();
    expect(await read(await call("/admin/users"))).toEqual([401, { detail: "Not authenticated" }]);
    expect(await read(await call("/admin/users", { headers: { authorization: "Token abc" } }))).toEqual([
      401,
      { detail: "Invalid authorization header format" },
    ]);
    expect(await read(await call("/admin/users", { headers: bearer("garbage") }))).toEqual([
      401,
      { detail: "Could not validate credentials" },
    ]);
    expect(await read(await call("/admin/users", { headers: bearer("sk_000000000000") }))).toEqual([
      401,
      { detail: "Could not validate credentials" },
    ]);
    const now = Math.floor(Date.now() / 1000);
    const forged = await sign({ sub: org.owner.userId, exp: now + 3600 }, "not-the-server-secret-at-all", "HS256");
    expect((await call("/admin/users", { headers: bearer(forged) })).status).toBe(401);
    const expired = await sign(
      { sub: org.owner.userId, iat: now - 7200, exp: now - 3600 },
      "test-jwt-secret-0123456789abcdef",
      "HS256",
    );
    expect((await call("/admin/users", { headers: bearer(expired) })).status).toBe(401);
    const none = `${btoa(JSON.stringify({ alg: "none", typ: "JWT" }))}.${btoa(JSON.stringify({ sub: org.owner.userId, exp: now + 3600 }))}.`;
    expect((await call("/admin/users", { headers: bearer(none) })).status).toBe(401);
  });

  it("path spellings never bypass auth", async () => {
    for (const path of [
      "/admin/users",
      "/Admin/users",
      "/ADMIN/USERS",
      "//admin/users",
      "/admin/users/",
      "/admin//users",
      "/%61dmin/users",
      "/admin/%75sers",
      "/admin/users%2F",
      "/./admin/users",
      "/admin/x/../users",
    ]) {
      const response = await call(path);
      expect([401, 404], path).toContain(response.status);
      expect(JSON.stringify(await response.json()), path).not.toContain('users":[');
    }
  });

  it("an admin cannot act on another organization: every such id is a 404", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const victim = await theirs.addMember("member");
    const auth = bearer(mine.owner.token);
    expect(
      await read(await call("/admin/users/change", form({ user_id: victim.userId, suspended: "true" }, auth, "PUT"))),
    ).toEqual([404, { detail: "user not found" }]);
    expect(await read(await call("/admin/users", form({ user_id: victim.userId }, auth, "DELETE")))).toEqual([
      404,
      { detail: "user not found" },
    ]);
    expect(await read(await call("/admin/owner/change", form({ user_id: victim.userId }, auth, "PUT")))).toEqual([
      404,
      { detail: "user not found" },
    ]);
    expect((await call("/auth/me", { headers: bearer(victim.token) })).status).toBe(200);

    const listed = JSON.stringify(await (await call("/admin/users", { headers: auth })).json());
    expect(listed).not.toContain(victim.userId);
    expect(listed).not.toContain(theirs.owner.userId);

    await call(
      "/admin/connections/create",
      form({ name: "theirs", kind: "anthropic", secret: "their-secret" }, bearer(theirs.owner.token)),
    );
    expect(
      await read(
        await call(
          "/admin/connections/update",
          form({ name: "theirs", base_url: "https://evil.example" }, auth, "PATCH"),
        ),
      ),
    ).toEqual([404, { detail: "connection not found" }]);
    expect(await read(await call("/admin/connections/delete", form({ name: "theirs" }, auth, "DELETE")))).toEqual([
      404,
      { detail: "connection not found" },
    ]);
    expect(JSON.stringify(await (await call("/admin/connections", { headers: auth })).json())).not.toContain("theirs");
  });

  it("another user's API key cannot be revoked by id", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const keys = (await (await call("/auth/api-keys", { headers: bearer(member.token) })).json()) as {
      api_keys: { id: string }[];
    };
    const response = await call(`/auth/api-keys/${keys.api_keys[0].id}`, {
      method: "DELETE",
      headers: bearer(org.owner.token),
    });
    expect(response.status).toBe(404);
    expect((await call("/auth/me", { headers: bearer(member.apiKey) })).status).toBe(200);
  });

  it("secrets never appear in any response: connection lists, audit log, errors", async () => {
    const org = await seedOrg();
    const canary = "CANARY-secret-7f3a9c2e1d";
    const auth = bearer(org.owner.token);
    const responses = [
      await call("/admin/connections/create", form({ name: "c1", kind: "openai", secret: canary }, auth)),
      await call("/admin/connections/create", form({ name: "c1", kind: "openai", secret: canary }, auth)),
      await call("/admin/connections/update", form({ name: "c1", secret: canary }, auth, "PATCH")),
      await call("/admin/connections/create", form({ name: "BAD NAME", kind: "openai", secret: canary }, auth)),
      await call("/admin/connections", { headers: auth }),
      await call("/admin/audit-log", { headers: auth }),
    ];
    for (const response of responses) expect(await response.text()).not.toContain(canary);
  });

  it("viewers and members cannot reach administration", async () => {
    const org = await seedOrg();
    const viewer = await org.addMember("viewer");
    for (const [path, init] of [
      ["/admin/users", {}],
      ["/admin/connections", {}],
      ["/admin/connections/create", form({ name: "x", kind: "openai" })],
      ["/admin/users/add", form({ email: "v@example.com", password: "long enough pw" })],
    ] as const) {
      const response = await call(path, {
        ...init,
        headers: { ...(init as RequestInit).headers, ...bearer(viewer.token) },
      });
      expect(response.status, path).toBe(403);
    }
  });
});

describe("login throttling", () => {
  it("answers 429 after ten attempts a minute for one account, even with the right password", async () => {
    const org = await seedOrg();
    // One right login (by username): the same account, so that is the first of the ten.
    const first = await call("/auth/login", form({ username: org.owner.username, password: org.owner.password }));
    expect(first.status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++)
      statuses.push((await call("/auth/login", form({ username: org.owner.email, password: "wrong guess" }))).status);
    expect(statuses.every((s) => s === 401)).toBe(true);
    const blocked = await call(
      "/auth/login",
      form({ username: org.owner.email.toUpperCase(), password: org.owner.password }),
    );
    expect([blocked.status, await blocked.json()]).toEqual([
      429,
      { detail: "too many login attempts for this account; wait a minute and try again" },
    ]);
    // Another account is not affected.
    const other = await seedOrg();
    expect(
      (await call("/auth/login", form({ username: other.owner.username, password: other.owner.password }))).status,
    ).toBe(200);
  });
});

const TIGHT = 3;
const ME_PATH = "/auth/me";
const trusted = { TRUST_CLIENT_IP_HEADER: "cf-connecting-ip" } as const;
const address = (): string => `2001:db8::${crypto.randomUUID().slice(0, 4)}:${crypto.randomUUID().slice(0, 4)}`;
const from = (ip: string, init: RequestInit): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), "cf-connecting-ip": ip },
});

/**
 * Sends until the first 429. With TEST_TIGHT_LIMITER (3 a minute) and a fresh key, the first three
 * pass; one window boundary may fall inside the loop, so a 429 comes within 2 x 3 + 1 requests.
 */
async function untilThrottled(
  send: (i: number) => Promise<Response>,
): Promise<{ passed: number[]; throttled: Response }> {
  const passed: number[] = [];
  for (let i = 0; i < 2 * TIGHT + 1; i++) {
    const response = await send(i);
    if (response.status === 429) {
      expect(passed.length, "a fresh key is not throttled before its limit").toBeGreaterThanOrEqual(TIGHT);
      return { passed, throttled: response };
    }
    passed.push(response.status);
  }
  throw new Error(`no 429 after ${passed.length} requests: ${passed.join(",")}`);
}

async function expectThrottled(response: Response, body: Json): Promise<void> {
  expect([response.status, await response.json()]).toEqual([429, body]);
  expect(response.headers.get("retry-after")).toBe("60");
}

describe("rate limits", () => {
  it("an API key past its limit answers 429 with Retry-After in each group's shape; other keys go on", async () => {
    const org = await seedOrg();
    const tight = { API_KEY_LIMITER: env.TEST_TIGHT_LIMITER };
    const { passed, throttled } = await untilThrottled(() =>
      callWith(tight, "/v1/transformations", { headers: bearer(org.owner.apiKey) }),
    );
    expect(passed.every((s) => s === 200)).toBe(true);
    const message = "too many requests with this API key; wait a minute and try again";
    await expectThrottled(throttled, { status: "failed", error: message });
    await expectThrottled(await callWith(tight, ME_PATH, { headers: bearer(org.owner.apiKey) }), { detail: message });
    const other = (await (
      await call("/auth/api-keys", json({ name: "second" }, bearer(org.owner.token)))
    ).json()) as Json;
    expect((await callWith(tight, "/v1/transformations", { headers: bearer(String(other.key)) })).status).toBe(200);
  });

  it("sign-ups are limited per trusted client address, and for everyone together when none is trusted", async () => {
    const signup = () => json({ email: `${crypto.randomUUID()}@example.com`, password: "correct horse battery" });
    const message = { detail: "too many sign-ups from your address; wait a minute and try again" };
    const limited = { ...trusted, SIGNUP_LIMITER: env.TEST_TIGHT_LIMITER };
    const ip = address();
    const { passed, throttled } = await untilThrottled(() => callWith(limited, "/auth/signup", from(ip, signup())));
    expect(passed.every((s) => s === 201)).toBe(true);
    await expectThrottled(throttled, message);
    expect((await callWith(limited, "/auth/signup", from(address(), signup()))).status).toBe(201);
    // Not configured to trust the header: a client rotating it still shares one bucket.
    const spoofed = await untilThrottled(() =>
      callWith({ SIGNUP_LIMITER: env.TEST_TIGHT_LIMITER }, "/auth/signup", from(address(), signup())),
    );
    await expectThrottled(spoofed.throttled, message);
  });

  it("logins are limited per client over every account, unknown accounts included", async () => {
    const org = await seedOrg();
    const limited = { ...trusted, LOGIN_CLIENT_LIMITER: env.TEST_TIGHT_LIMITER };
    const ip = address();
    const { passed, throttled } = await untilThrottled((i) =>
      callWith(
        limited,
        "/auth/login",
        from(ip, form({ username: `nobody-${crypto.randomUUID()}-${i}`, password: "wrong guess" })),
      ),
    );
    expect(passed.every((s) => s === 401)).toBe(true);
    await expectThrottled(throttled, {
      detail: "too many login attempts from your address; wait a minute and try again",
    });
    expect(
      (
        await callWith(
          limited,
          "/auth/login",
          from(address(), form({ username: org.owner.username, password: org.owner.password })),
        )
      ).status,
    ).toBe(200);
  });
});

describe("login throttling: no lockout, no oracle", () => {
  it("one client failing on purpose throttles only itself: the owner still signs in from elsewhere", async () => {
    const org = await seedOrg();
    const attacker = address();
    for (let i = 0; i < 10; i++)
      expect(
        (
          await callWith(
            trusted,
            "/auth/login",
            from(attacker, form({ username: org.owner.email, password: "wrong guess" })),
          )
        ).status,
      ).toBe(401);
    await expectThrottled(
      await callWith(
        trusted,
        "/auth/login",
        from(attacker, form({ username: org.owner.username, password: org.owner.password })),
      ),
      { detail: "too many login attempts for this account; wait a minute and try again" },
    );
    expect(
      (
        await callWith(
          trusted,
          "/auth/login",
          from(address(), form({ username: org.owner.email, password: org.owner.password })),
        )
      ).status,
    ).toBe(200);
  });

  it("every spelling of an account (email in any case, username) counts against the same limit", async () => {
    const org = await seedOrg();
    const spellings = [org.owner.email, org.owner.username, org.owner.email.toUpperCase(), ` ${org.owner.username} `];
    // One right login (by username), then nine guesses: ten attempts.
    expect(
      (await call("/auth/login", form({ username: org.owner.username, password: org.owner.password }))).status,
    ).toBe(200);
    for (let i = 0; i < 9; i++)
      expect(
        (await call("/auth/login", form({ username: spellings[i % spellings.length], password: "wrong guess" })))
          .status,
      ).toBe(401);
    await expectThrottled(
      await call("/auth/login", form({ username: org.owner.username, password: org.owner.password })),
      { detail: "too many login attempts for this account; wait a minute and try again" },
    );
  });

  it("guesses spread over many clients meet the per-account ceiling", async () => {
    const org = await seedOrg();
    const limited = { ...trusted, LOGIN_ACCOUNT_LIMITER: env.TEST_TIGHT_LIMITER };
    const { throttled } = await untilThrottled(() =>
      callWith(
        limited,
        "/auth/login",
        from(address(), form({ username: org.owner.username, password: "wrong guess" })),
      ),
    );
    await expectThrottled(throttled, {
      detail: "too many login attempts for this account; wait a minute and try again",
    });
  });

  it("a suspended account answers its right password exactly as a wrong one", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    expect(
      (
        await call(
          "/admin/users/change",
          form({ user_id: member.userId, suspended: "true" }, bearer(org.owner.token), "PUT"),
        )
      ).status,
    ).toBe(200);
    const right = await read(await call("/auth/login", form({ username: member.username, password: member.password })));
    const wrong = await read(await call("/auth/login", form({ username: member.username, password: "wrong guess" })));
    expect(right).toEqual([401, { detail: "Incorrect username or password" }]);
    expect(wrong).toEqual(right);
  });
});

describe("password policy", () => {
  const weak = [
    "password",
    "12345678",
    "        ",
    "               ",
    "aaaaaaaaaaaaaaaa",
    "abababababababab",
    "1q2w3e4r5t6y",
    "passwordpassword",
    "Password2024!!",
    "Administrator123",
    "short pw",
  ];

  it("sign-up refuses short, blank and common passwords with a 422 naming the field, and creates nothing", async () => {
    for (const password of weak) {
      const email = `${crypto.randomUUID()}@example.com`;
      const [status, body] = await read(await call("/auth/signup", json({ email, password })));
      expect(status, password).toBe(422);
      const issues = body.detail as { loc: unknown[] }[];
      expect(issues.length, password).toBeGreaterThan(0);
      for (const issue of issues) expect(issue.loc, password).toEqual(["body", "password"]);
      expect((await call("/auth/signup", json({ email, password: "correct horse battery" }))).status, password).toBe(
        201,
      );
    }
  });

  it("a long but common password is refused by the list, in the HTTPValidationError shape", async () => {
    const [status, body] = await read(
      await call("/auth/signup", json({ email: `${crypto.randomUUID()}@example.com`, password: "1q2w3e4r5t6y" })),
    );
    expect([status, body]).toEqual([
      422,
      {
        detail: [
          {
            loc: ["body", "password"],
            msg: "is too common: it appears in lists of leaked passwords; choose another",
            type: "password_too_common",
          },
        ],
      },
    ]);
  });

  it("an administrator cannot add a user with a weak password either", async () => {
    const org = await seedOrg();
    for (const password of weak) {
      const [status, body] = await read(
        await call(
          "/admin/users/add",
          form({ email: `${crypto.randomUUID()}@example.com`, password }, bearer(org.owner.token)),
        ),
      );
      expect(status, password).toBe(422);
      expect(JSON.stringify(body.detail), password).toContain('"loc":["body","password"]');
    }
  });
});

describe("access tokens", () => {
  it("a token signed with the server's secret is refused without the access audience or with another", async () => {
    const org = await seedOrg();
    const secret = "test-jwt-secret-0123456789abcdef";
    const now = Math.floor(Date.now() / 1000);
    const claims = { sub: org.owner.userId, org: org.orgId, iat: now, exp: now + 600 };
    const me = async (token: string) => read(await call(ME_PATH, { headers: bearer(token) }));
    expect((await me(await sign({ ...claims, aud: TOKEN_AUDIENCE.access }, secret, "HS256")))[0]).toBe(200);
    const refused = [401, { detail: "Could not validate credentials" }];
    for (const aud of [undefined, TOKEN_AUDIENCE.visitor, "someone-else", [TOKEN_AUDIENCE.visitor]])
      expect(await me(await sign({ ...claims, aud }, secret, "HS256")), String(aud)).toEqual(refused);
  });

  it("a token signed with the server's secret but without a numeric exp is refused", async () => {
    const org = await seedOrg();
    const secret = "test-jwt-secret-0123456789abcdef";
    const now = Math.floor(Date.now() / 1000);
    const refused = [401, { detail: "Could not validate credentials" }];
    expect(
      await read(
        await call(ME_PATH, {
          headers: bearer(
            await sign(
              { sub: org.owner.userId, org: org.orgId, aud: TOKEN_AUDIENCE.access, iat: now },
              secret,
              "HS256",
            ),
          ),
        }),
      ),
    ).toEqual(refused);
    expect(
      await read(
        await call(ME_PATH, {
          headers: bearer(
            await sign(
              {
                sub: org.owner.userId,
                org: org.orgId,
                aud: TOKEN_AUDIENCE.access,
                iat: now,
                exp: "never",
              } as unknown as Parameters<typeof sign>[0],
              secret,
              "HS256",
            ),
          ),
        }),
      ),
    ).toEqual(refused);
    // The same claims with an expiry are accepted, so the refusals above are about exp alone.
    expect(
      (
        await call(ME_PATH, {
          headers: bearer(
            await sign(
              { sub: org.owner.userId, org: org.orgId, aud: TOKEN_AUDIENCE.access, iat: now, exp: now + 600 },
              secret,
              "HS256",
            ),
          ),
        })
      ).status,
    ).toBe(200);
  });
});

describe("request bodies: null as 'not set' and `field=true` beside dotted fields open no hole", () => {
  const post = (key: string, path: string, body: string, type = "application/json") =>
    call(path, { method: "POST", headers: { ...bearer(key), "content-type": type }, body });

  it("a required field sent as null is missing (400), and nothing is created", async () => {
    const org = await seedOrg();
    const [status, body] = await read(
      await post(org.owner.apiKey, "/v1/knowledge-base", JSON.stringify({ name: null, chunk_size: null })),
    );
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^name: /);
    expect(
      (await (await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).json()) as Json,
    ).toMatchObject({ object_ids: [] });
  });

  it("null items of a list stay values and are refused", async () => {
    const org = await seedOrg();
    const [status, body] = await read(
      await post(org.owner.apiKey, "/v1/pipeline/0123456789abcdef01234567/resume", JSON.stringify({ run_ids: [null] })),
    );
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^run_ids\.0: /);
  });

  it("only `true` marks an object as present, and a marked object still refuses prototype keys", async () => {
    const org = await seedOrg();
    const path = "/v1/knowledge-base/0123456789abcdef01234567/index";
    const form = "application/x-www-form-urlencoded";
    expect(
      await read(await post(org.owner.apiKey, path, "file_data=true&file_data.__proto__.polluted=yes", form)),
    ).toEqual([400, { status: "failed", error: "invalid field name: file_data.__proto__.polluted" }]);
    expect(await read(await post(org.owner.apiKey, path, "file_data=yes&file_data.metadata.name=a.txt", form))).toEqual(
      [400, { status: "failed", error: "field file_data is given both as a value and as an object" }],
    );
    expect(({} as Json).polluted).toBeUndefined();
    // Marked but empty: the object is there and incomplete, a clear 400 rather than a crash.
    const [status, body] = await read(
      await post(org.owner.apiKey, path, "file_data=true&file_data.metadata.name=a.txt", form),
    );
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^file_data\.file: /);
  });
});

describe("request body caps", () => {
  it("every route stops reading a body at its cap, counting as it streams, and credentials are checked before any of it is read", async () => {
    const org = await seedOrg();
    const post = (path: string, body: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
      call(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
    // Routes open to anyone read at most 1 MiB; a declared length is not trusted either.
    const signup = countingBody(50 * MiB);
    const anonymousBig = await post("/auth/signup", signup.stream);
    expect(signup.pulled()).toBeLessThan(2 * MiB);
    expect([anonymousBig.status, await anonymousBig.json()]).toEqual([
      413,
      { detail: "request body exceeds 1048576 bytes" },
    ]);
    const lying = countingBody(50 * MiB);
    const lie = await post("/auth/signup", lying.stream, { "content-length": "64" });
    expect(lying.pulled()).toBeLessThan(2 * MiB);
    expect([lie.status, await lie.json()]).toEqual([400, { detail: "request body is longer than its Content-Length" }]);
    // Signed-in routes read up to 32 MiB, and not past it.
    const big = countingBody(50 * MiB);
    const res = await post("/auth/api-keys", big.stream, bearer(org.owner.token));
    expect(big.pulled()).toBeLessThan(33 * MiB);
    expect([res.status, await res.json()]).toEqual([413, { detail: "request body exceeds 33554432 bytes" }]);
    const groupA = countingBody(50 * MiB);
    const v1 = await post("/v1/knowledge-base", groupA.stream, bearer(org.owner.apiKey));
    expect(groupA.pulled()).toBeLessThan(33 * MiB);
    expect([v1.status, await v1.json()]).toEqual([
      413,
      { status: "failed", error: "request body exceeds 33554432 bytes" },
    ]);
    // Without credentials nothing of the body is read at all.
    const anonymous = countingBody(50 * MiB);
    const refused = await post("/auth/api-keys", anonymous.stream);
    expect(refused.status).toBe(401);
    expect(anonymous.pulled()).toBeLessThanOrEqual(64 * 1024);
  });
});

const directives = (csp: string | null): Record<string, string> =>
  Object.fromEntries(
    (csp ?? "")
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .map(([name, ...values]) => [name, values.join(" ")]),
  );

describe("security headers", () => {
  it("every response, success or error, JSON or HTML, says nosniff, sends no referrer and may not be framed", async () => {
    const org = await seedOrg();
    const responses = {
      openapi: await call("/openapi.json"),
      docs: await call("/docs"),
      ok: await call("/auth/me", { headers: bearer(org.owner.token) }),
      unauthorized: await call("/v1/chatbots"),
      invalid: await call("/auth/api-keys", {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(org.owner.token) },
        body: "{",
      }),
      unknown: await call("/nope"),
      preflight: await call("/chatbots/deployed/0123456789abcdef01234567/run", {
        method: "OPTIONS",
        headers: { origin: "https://shop.example", "access-control-request-method": "POST" },
      }),
    };
    for (const [name, response] of Object.entries(responses)) {
      expect(response.headers.get("x-content-type-options"), name).toBe("nosniff");
      expect(response.headers.get("referrer-policy"), name).toBe("no-referrer");
      expect(response.headers.get("x-frame-options"), name).toBe("DENY");
      const csp = directives(response.headers.get("content-security-policy"));
      expect(csp["default-src"], name).toBe("'none'");
      expect(csp["frame-ancestors"], name).toBe("'none'");
      await response.body?.cancel();
    }
  });

  it("/docs runs under a strict CSP: no inline script or style, its own files from Loom's origin only, fetches only to Loom", async () => {
    const response = await call("/docs");
    const csp = directives(response.headers.get("content-security-policy"));
    const html = await response.text();
    // Swagger UI's page loads its script and stylesheet as files; nothing inline needs a hash.
    expect([...html.matchAll(/<script>([\s\S]*?)<\/script>/g)]).toHaveLength(0);
    expect([...html.matchAll(/<style>([\s\S]*?)<\/style>/g)]).toHaveLength(0);
    expect(csp["script-src"]).toBe("'self'");
    expect(csp["style-src"]).toBe("'self'");
    expect(csp["connect-src"]).toBe("'self'");
    expect(csp["base-uri"]).toBe("'none'");
    expect(JSON.stringify(csp)).not.toContain("unsafe");
    // A CSP without 'unsafe-inline' would block inline handlers and style attributes: the page has none.
    expect(html).not.toMatch(/<[^>]+\s(on[a-z]+|style)\s*=/i);
  });

  it("a page may set its own policy, e.g. frame-ancestors from a chatbot's allowed origins; unsafe sources are dropped", async () => {
    const app = new Hono<AppBindings>();
    app.use("*", securityHeaders);
    app.get("/chat", (c) => {
      setPagePolicy(c, { frameAncestors: ["https://shop.example", "https://evil.example; script-src *", "*"] });
      return c.html("<p>chat</p>");
    });
    const response = await app.request("/chat");
    expect(directives(response.headers.get("content-security-policy"))).toMatchObject({
      "frame-ancestors": "https://shop.example",
      "script-src": "'none'",
    });
    expect(response.headers.get("x-frame-options")).toBeNull();
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
  });
});

describe("hostile body shapes", () => {
  it("bodies nested past 64 levels or holding a __proto__ key are a 400 in the group's shape, in every encoding, and nothing is stored", async () => {
    const org = await seedOrg();
    const deep = (levels: number) => '{"a":'.repeat(levels) + "1" + "}".repeat(levels);
    const send = (path: string, type: string, body: string, credential: string) =>
      call(path, { method: "POST", headers: { "content-type": type, ...bearer(credential) }, body });
    const json = "application/json";
    const urlencoded = "application/x-www-form-urlencoded";

    expect(
      await read(
        await send("/v1/knowledge-base", json, `{"name":"kb","description":${deep(10_000)}}`, org.owner.apiKey),
      ),
    ).toEqual([400, { status: "failed", error: "request body nests deeper than 64 levels" }]);
    expect(
      await read(await send("/agents/add", json, `{"name":"deep","config":${deep(10_000)}}`, org.owner.token)),
    ).toEqual([400, { detail: "request body nests deeper than 64 levels" }]);
    expect(
      await read(
        await send("/agents/add", json, '{"name":"proto","config":{"__proto__":{"polluted":true}}}', org.owner.token),
      ),
    ).toEqual([400, { detail: "request body has a field named __proto__" }]);
    // The same shapes as JSON text inside a form field, and as dotted field names.
    const asText = await send(
      "/agents/add",
      urlencoded,
      new URLSearchParams({ name: "deep-text", config: deep(10_000) }).toString(),
      org.owner.token,
    );
    expect(asText.status).toBe(422);
    const dotted = await read(
      await send("/agents/add", urlencoded, `name=dotted&${"config.".repeat(10_000)}x=1`, org.owner.token),
    );
    expect(dotted[0]).toBe(400);
    // Depth that real bodies use still works.
    expect((await send("/agents/add", json, `{"name":"fine","config":${deep(20)}}`, org.owner.token)).status).toBe(200);
    const agents = (await (await call("/agents/my", { headers: bearer(org.owner.token) })).json()) as {
      name: string;
    }[];
    expect(agents.map((a) => a.name)).toEqual(["fine"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
