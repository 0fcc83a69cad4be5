import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { NOT_AN_API_KEY } from "../../src/middleware/auth";

/** Every documented Group A route, with ids filled in: each must refuse the same way without a valid API key. */
async function groupARoutes(): Promise<[string, string][]> {
  const doc = (await (await call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
  return Object.entries(doc.paths)
    .filter(([path]) => path.startsWith("/v1/"))
    .flatMap(([path, ops]) =>
      Object.keys(ops).map((method): [string, string] => [
        method.toUpperCase(),
        path.replace(/\{[^}]+\}/g, "aaaaaaaaaaaaaaaaaaaaaaaa"),
      ]),
    );
}

describe("Group A auth: the three exact 401 bodies, and no path spelling bypasses them", () => {
  it("answers the contract's three bodies, with no status field", async () => {
    const routes = await groupARoutes();
    expect(routes.length).toBeGreaterThan(5);
    for (const [method, path] of routes) {
      const where = `${method} ${path}`;
      const missing = await call(path, { method });
      expect([missing.status, await missing.json()], where).toEqual([401, { error: "Missing authorization header" }]);
      const format = await call(path, { method, headers: { authorization: "Basic dXNlcjpwdw==" } });
      expect([format.status, await format.json()], where).toEqual([
        401,
        { error: "Invalid authorization header format" },
      ]);
      const invalid = await call(path, { method, headers: bearer("sk_not_a_real_key") });
      expect([invalid.status, await invalid.json()], where).toEqual([401, { error: "Invalid API key" }]);
    }
  });

  it("takes API keys only: an access token is not a Group A credential", async () => {
    const org = await seedOrg();
    const response = await call("/v1/knowledge-bases", { headers: bearer(org.owner.token) });
    expect([response.status, await response.json()]).toEqual([401, { error: NOT_AN_API_KEY }]);
    expect((await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).status).toBe(200);
  });

  it("a revoked key, or the key of a deleted or suspended user, fails at once", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const keys = (await (await call("/auth/api-keys", { headers: bearer(org.owner.token) })).json()) as {
      api_keys: { id: string }[];
    };
    expect((await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).status).toBe(200);
    await call(`/auth/api-keys/${keys.api_keys[0].id}`, { method: "DELETE", headers: bearer(org.owner.token) });
    expect(await (await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).json()).toEqual({
      error: "Invalid API key",
    });

    expect((await call("/v1/knowledge-bases", { headers: bearer(member.apiKey) })).status).toBe(200);
    await call(
      "/admin/users/change",
      form({ user_id: member.userId, suspended: "true" }, bearer(org.owner.token), "PUT"),
    );
    expect((await call("/v1/knowledge-bases", { headers: bearer(member.apiKey) })).status).toBe(401);
    await call("/admin/users", form({ user_id: member.userId }, bearer(org.owner.token), "DELETE"));
    expect((await call("/v1/knowledge-bases", { headers: bearer(member.apiKey) })).status).toBe(401);
  });

  it("path tricks never reach data without a key", async () => {
    for (const path of [
      "/V1/knowledge-bases",
      "//v1/knowledge-bases",
      "/%76%31/knowledge-bases",
      "/v1/knowledge-bases/",
      "/v1//knowledge-bases",
      "/v1/%6bnowledge-bases",
      "/v1/./knowledge-bases",
      "/v1/x/../knowledge-bases",
      "/v1/knowledge-bases;x",
      "/v1/knowledge-bases%00",
    ]) {
      const response = await call(path);
      expect([401, 404], path).toContain(response.status);
      expect(JSON.stringify(await response.json()), path).not.toContain("object_ids");
    }
  });

  it("Group A failures use the {status: failed, error} envelope", async () => {
    const org = await seedOrg();
    const response = await call("/v1/knowledge-base", { headers: bearer(org.owner.apiKey) });
    expect([response.status, await response.json()]).toEqual([
      400,
      { status: "failed", error: "Either id or name must be provided" },
    ]);
    const bad = await call("/v1/transformation", json({ name: 5 }, bearer(org.owner.apiKey)));
    const body = (await bad.json()) as Record<string, unknown>;
    expect(bad.status).toBe(400);
    expect(body.status).toBe("failed");
    expect(typeof body.error).toBe("string");
  });
});
