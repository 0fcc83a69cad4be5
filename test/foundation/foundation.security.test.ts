import { describe, expect, it } from "vitest";
import { sign } from "hono/jwt";
import { bearer, call, form, seedOrg } from "../helpers";

type Json = Record<string, unknown>;
const read = async (response: Response): Promise<[number, Json]> => [response.status, (await response.json()) as Json];

describe("foundation: security", () => {
  it("Group B routes answer 401 for missing, malformed, forged and expired credentials", async () => {
    const org = await seedOrg();
    expect(await read(await call("/admin/users"))).toEqual([401, { detail: "Not authenticated" }]);
    expect(await read(await call("/admin/users", { headers: { authorization: "Token abc" } }))).toEqual([401, { detail: "Invalid authorization header format" }]);
    expect(await read(await call("/admin/users", { headers: bearer("garbage") }))).toEqual([401, { detail: "Could not validate credentials" }]);
    expect(await read(await call("/admin/users", { headers: bearer("sk_000000000000") }))).toEqual([401, { detail: "Could not validate credentials" }]);
    const now = Math.floor(Date.now() / 1000);
    const forged = await sign({ sub: org.owner.userId, exp: now + 3600 }, "not-the-server-secret-at-all", "HS256");
    expect((await call("/admin/users", { headers: bearer(forged) })).status).toBe(401);
    const expired = await sign({ sub: org.owner.userId, iat: now - 7200, exp: now - 3600 }, "test-jwt-secret-0123456789abcdef", "HS256");
    expect((await call("/admin/users", { headers: bearer(expired) })).status).toBe(401);
    const none = `${btoa(JSON.stringify({ alg: "none", typ: "JWT" }))}.${btoa(JSON.stringify({ sub: org.owner.userId, exp: now + 3600 }))}.`;
    expect((await call("/admin/users", { headers: bearer(none) })).status).toBe(401);
  });

  it("path spellings never bypass auth", async () => {
    for (const path of ["/admin/users", "/Admin/users", "/ADMIN/USERS", "//admin/users", "/admin/users/", "/admin//users", "/%61dmin/users", "/admin/%75sers", "/admin/users%2F", "/./admin/users", "/admin/x/../users"]) {
      const response = await call(path);
      expect([401, 404], path).toContain(response.status);
      expect(JSON.stringify(await response.json()), path).not.toContain("users\":[");
    }
  });

  it("an admin cannot act on another organization: every such id is a 404", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const victim = await theirs.addMember("member");
    const auth = bearer(mine.owner.token);
    expect(await read(await call("/admin/users/change", form({ user_id: victim.userId, suspended: "true" }, auth, "PUT")))).toEqual([404, { detail: "user not found" }]);
    expect(await read(await call("/admin/users", form({ user_id: victim.userId }, auth, "DELETE")))).toEqual([404, { detail: "user not found" }]);
    expect(await read(await call("/admin/owner/change", form({ user_id: victim.userId }, auth, "PUT")))).toEqual([404, { detail: "user not found" }]);
    expect((await call("/auth/me", { headers: bearer(victim.token) })).status).toBe(200);

    const listed = JSON.stringify(await (await call("/admin/users", { headers: auth })).json());
    expect(listed).not.toContain(victim.userId);
    expect(listed).not.toContain(theirs.owner.userId);

    await call("/admin/connections/create", form({ name: "theirs", kind: "anthropic", secret: "their-secret" }, bearer(theirs.owner.token)));
    expect(await read(await call("/admin/connections/update", form({ name: "theirs", base_url: "https://evil.example" }, auth, "PATCH")))).toEqual([404, { detail: "connection not found" }]);
    expect(await read(await call("/admin/connections/delete", form({ name: "theirs" }, auth, "DELETE")))).toEqual([404, { detail: "connection not found" }]);
    expect(JSON.stringify(await (await call("/admin/connections", { headers: auth })).json())).not.toContain("theirs");
  });

  it("another user's API key cannot be revoked by id", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const keys = (await (await call("/auth/api-keys", { headers: bearer(member.token) })).json()) as { api_keys: { id: string }[] };
    const response = await call(`/auth/api-keys/${keys.api_keys[0].id}`, { method: "DELETE", headers: bearer(org.owner.token) });
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
      const response = await call(path, { ...init, headers: { ...(init as RequestInit).headers, ...bearer(viewer.token) } });
      expect(response.status, path).toBe(403);
    }
  });
});

describe("login throttling", () => {
  it("answers 429 after ten attempts a minute for one account, even with the right password", async () => {
    const org = await seedOrg();
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await call("/auth/login", form({ username: org.owner.email, password: "wrong guess" }))).status);
    expect(statuses.every((s) => s === 401)).toBe(true);
    const blocked = await call("/auth/login", form({ username: org.owner.email.toUpperCase(), password: org.owner.password }));
    expect([blocked.status, await blocked.json()]).toEqual([429, { detail: "too many login attempts for this account; wait a minute and try again" }]);
    // Another account is not affected.
    const other = await seedOrg();
    expect((await call("/auth/login", form({ username: other.owner.username, password: other.owner.password }))).status).toBe(200);
  });
});

describe("request bodies: null as 'not set' and `field=true` beside dotted fields open no hole", () => {
  const post = (key: string, path: string, body: string, type = "application/json") => call(path, { method: "POST", headers: { ...bearer(key), "content-type": type }, body });

  it("a required field sent as null is missing (400), and nothing is created", async () => {
    const org = await seedOrg();
    const [status, body] = await read(await post(org.owner.apiKey, "/v1/knowledge-base", JSON.stringify({ name: null, chunk_size: null })));
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^name: /);
    expect((await (await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).json()) as Json).toMatchObject({ object_ids: [] });
  });

  it("null items of a list stay values and are refused", async () => {
    const org = await seedOrg();
    const [status, body] = await read(await post(org.owner.apiKey, "/v1/pipeline/0123456789abcdef01234567/resume", JSON.stringify({ run_ids: [null] })));
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^run_ids\.0: /);
  });

  it("only `true` marks an object as present, and a marked object still refuses prototype keys", async () => {
    const org = await seedOrg();
    const path = "/v1/knowledge-base/0123456789abcdef01234567/index";
    const form = "application/x-www-form-urlencoded";
    expect(await read(await post(org.owner.apiKey, path, "file_data=true&file_data.__proto__.polluted=yes", form))).toEqual([400, { status: "failed", error: "invalid field name: file_data.__proto__.polluted" }]);
    expect(await read(await post(org.owner.apiKey, path, "file_data=yes&file_data.metadata.name=a.txt", form))).toEqual([400, { status: "failed", error: "field file_data is given both as a value and as an object" }]);
    expect(({} as Json).polluted).toBeUndefined();
    // Marked but empty: the object is there and incomplete, a clear 400 rather than a crash.
    const [status, body] = await read(await post(org.owner.apiKey, path, "file_data=true&file_data.metadata.name=a.txt", form));
    expect(status).toBe(400);
    expect(String(body.error)).toMatch(/^file_data\.file: /);
  });
});
