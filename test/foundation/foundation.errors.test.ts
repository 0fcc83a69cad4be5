import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";

type Json = Record<string, unknown>;
const read = async (response: Response): Promise<[number, Json]> => [response.status, (await response.json()) as Json];

describe("foundation: every documented failure, with its exact body", () => {
  it("sign-up validation answers 422 in the HTTPValidationError shape", async () => {
    const [status, body] = await read(await call("/auth/signup", json({ email: "not-an-email", password: "short" })));
    expect(status).toBe(422);
    expect(body.detail).toEqual([
      { loc: ["body", "email"], msg: "must be an email address", type: "invalid_format" },
      { loc: ["body", "password"], msg: expect.stringContaining("12") as unknown as string, type: "too_small" },
    ]);
  });

  it("sign-up with a taken email or organization answers 409", async () => {
    const org = await seedOrg();
    expect(
      await read(await call("/auth/signup", json({ email: org.owner.email, password: "long enough pw" }))),
    ).toEqual([409, { detail: "a user with that email or username already exists" }]);
    const [status, body] = await read(
      await call(
        "/auth/signup",
        json({ email: `x${Date.now()}@example.com`, password: "long enough pw", organization: org.name }),
      ),
    );
    expect(status).toBe(409);
    expect(body.detail).toContain("already exists; ask one of its administrators to add you");
  });

  it("login with a wrong password or unknown user answers the same 401", async () => {
    const org = await seedOrg();
    const wrong = await read(
      await call("/auth/login", form({ username: org.owner.username, password: "wrong password" })),
    );
    const unknown = await read(
      await call("/auth/login", form({ username: "nobody-here", password: "wrong password" })),
    );
    expect(wrong).toEqual([401, { detail: "Incorrect username or password" }]);
    expect(unknown).toEqual(wrong);
  });

  it("malformed, non-object and oversized bodies are clear 4xx answers", async () => {
    const org = await seedOrg();
    const headers = { "content-type": "application/json", ...bearer(org.owner.token) };
    expect(await read(await call("/auth/api-keys", { method: "POST", headers, body: "{not json" }))).toEqual([
      400,
      { detail: "request body is not valid JSON" },
    ]);
    expect(await read(await call("/auth/api-keys", { method: "POST", headers, body: "[1,2]" }))).toEqual([
      400,
      { detail: "request body must be a JSON object" },
    ]);
    const huge = "x".repeat(33 * 1024 * 1024);
    const [status] = await read(
      await call("/auth/api-keys", { method: "POST", headers, body: JSON.stringify({ name: huge }) }),
    );
    expect(status).toBe(413);
    const [badField] = await read(
      await call("/auth/api-keys", form({ "__proto__.polluted": "1", name: "x" }, bearer(org.owner.token))),
    );
    expect(badField).toBe(400);
  });

  it("revoking an unknown key answers 404, a malformed id 422", async () => {
    const org = await seedOrg();
    expect(
      await read(
        await call("/auth/api-keys/aaaaaaaaaaaaaaaaaaaaaaaa", { method: "DELETE", headers: bearer(org.owner.token) }),
      ),
    ).toEqual([404, { detail: "API key not found" }]);
    const [status, body] = await read(
      await call("/auth/api-keys/nope", { method: "DELETE", headers: bearer(org.owner.token) }),
    );
    expect(status).toBe(422);
    expect(body.detail).toEqual([
      { loc: ["path", "id"], msg: "must be a 24-character hex id", type: "invalid_format" },
    ]);
  });

  it("admin routes need admin, the owner change needs the owner", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const admin = await org.addMember("admin");
    expect(await read(await call("/admin/users", { headers: bearer(member.token) }))).toEqual([
      403,
      { detail: "this action needs the admin role or higher" },
    ]);
    expect(
      await read(await call("/admin/owner/change", form({ user_id: admin.userId }, bearer(admin.token), "PUT"))),
    ).toEqual([403, { detail: "this action needs the owner role or higher" }]);
    expect(await read(await call("/admin/audit-log", { headers: bearer(admin.token) }))).toEqual([
      403,
      { detail: "this action needs the owner role or higher" },
    ]);
  });

  it("nobody removes, demotes or suspends the owner except through owner change", async () => {
    const org = await seedOrg();
    const admin = await org.addMember("admin");
    const owner = org.owner.userId;
    const firm = {
      detail: "the owner cannot be demoted or suspended; transfer ownership with /admin/owner/change first",
    };
    expect(await read(await call("/admin/users", form({ user_id: owner }, bearer(admin.token), "DELETE")))).toEqual([
      403,
      { detail: "the owner cannot be removed; transfer ownership with /admin/owner/change first" },
    ]);
    expect(
      await read(
        await call("/admin/users/change", form({ user_id: owner, role: "member" }, bearer(admin.token), "PUT")),
      ),
    ).toEqual([403, firm]);
    expect(
      await read(
        await call("/admin/users/change", form({ user_id: owner, suspended: "true" }, bearer(admin.token), "PUT")),
      ),
    ).toEqual([403, firm]);
    expect(await read(await call("/admin/users", form({ user_id: owner }, bearer(org.owner.token), "DELETE")))).toEqual(
      [403, { detail: "the owner cannot be removed; transfer ownership with /admin/owner/change first" }],
    );
    expect(
      await read(
        await call(
          "/admin/users/change",
          form({ user_id: admin.userId, role: "owner" }, bearer(org.owner.token), "PUT"),
        ),
      ),
    ).toEqual([
      422,
      {
        detail: [
          { loc: ["body", "role"], msg: "the owner role moves only through /admin/owner/change", type: "value_error" },
        ],
      },
    ]);
    expect(
      await read(
        await call(
          "/admin/users/change",
          form({ user_id: admin.userId, role: "emperor" }, bearer(org.owner.token), "PUT"),
        ),
      ),
    ).toEqual([
      422,
      {
        detail: [
          { loc: ["body", "role"], msg: "must be one of admin, member, viewer (got 'emperor')", type: "value_error" },
        ],
      },
    ]);
    expect(
      await read(await call("/admin/owner/change", form({ user_id: owner }, bearer(org.owner.token), "PUT"))),
    ).toEqual([400, { detail: "user_id: you are already the owner" }]);
  });

  it("adding a user with a taken email answers 409; unknown users 404", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    expect(
      await read(
        await call(
          "/admin/users/add",
          form({ email: member.email, password: "long enough pw" }, bearer(org.owner.token)),
        ),
      ),
    ).toEqual([409, { detail: "a user with that email or username already exists" }]);
    expect(
      await read(
        await call(
          "/admin/users/change",
          form({ user_id: "bbbbbbbbbbbbbbbbbbbbbbbb", name: "x" }, bearer(org.owner.token), "PUT"),
        ),
      ),
    ).toEqual([404, { detail: "user not found" }]);
  });

  it("connection failures: taken name, bad kind, URL with credentials, unknown connection", async () => {
    const org = await seedOrg();
    const auth = bearer(org.owner.token);
    await call("/admin/connections/create", form({ name: "openai", kind: "openai" }, auth));
    expect(await read(await call("/admin/connections/create", form({ name: "openai", kind: "openai" }, auth)))).toEqual(
      [409, { detail: "a connection named 'openai' already exists" }],
    );
    const [kindStatus, kindBody] = await read(
      await call("/admin/connections/create", form({ name: "x", kind: "carrier-pigeon" }, auth)),
    );
    expect(kindStatus).toBe(422);
    expect((kindBody.detail as Json[])[0]).toMatchObject({ loc: ["body", "kind"] });
    const [urlStatus, urlBody] = await read(
      await call(
        "/admin/connections/create",
        form({ name: "y", kind: "openai", base_url: "https://user:pw@example.com" }, auth),
      ),
    );
    expect(urlStatus).toBe(422);
    expect((urlBody.detail as Json[])[0]).toEqual({
      loc: ["body", "base_url"],
      msg: "must be an http(s) URL without credentials",
      type: "custom",
    });
    expect(
      await read(
        await call("/admin/connections/update", form({ name: "nope", base_url: "https://example.com" }, auth, "PATCH")),
      ),
    ).toEqual([404, { detail: "connection not found" }]);
    expect(await read(await call("/admin/connections/delete", form({}, auth, "DELETE")))).toEqual([
      422,
      {
        detail: [
          { loc: ["body", "connection_id"], msg: "Either connection_id or name must be provided", type: "missing" },
        ],
      },
    ]);
  });
});
