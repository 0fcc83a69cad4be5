import { describe, expect, it } from "vitest";
import { bearer, call, form, seedOrg } from "../helpers";

type Json = Record<string, unknown>;
const body = async (response: Response): Promise<Json> => (await response.json()) as Json;

describe("administration: happy paths", () => {
  it("adds users with roles and lists them without password hashes", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const viewer = await org.addMember("viewer");
    const list = await call("/admin/users", { headers: bearer(org.owner.token) });
    expect(list.status).toBe(200);
    const listed = await body(list);
    const users = listed.users as Json[];
    expect(users.map((u) => u._id).sort()).toEqual([org.owner.userId, member.userId, viewer.userId].sort());
    expect(users.find((u) => u._id === viewer.userId)).toMatchObject({ role: "viewer", suspended: false });
    expect(JSON.stringify(listed)).not.toMatch(/password|pbkdf2/i);
  });

  it("changes a role and a name, and suspension stops the user's token and keys at once", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const changed = await call(
      "/admin/users/change",
      form({ user_id: member.userId, role: "admin", name: "Ada" }, bearer(org.owner.token), "PUT"),
    );
    expect(changed.status).toBe(200);
    expect((await body(changed)).user).toMatchObject({ role: "admin", name: "Ada" });
    // The new role applies to the existing token immediately.
    expect((await call("/admin/users", { headers: bearer(member.token) })).status).toBe(200);

    const suspended = await call(
      "/admin/users/change",
      form({ user_id: member.userId, suspended: "true" }, bearer(org.owner.token), "PUT"),
    );
    expect(suspended.status).toBe(200);
    expect((await call("/auth/me", { headers: bearer(member.token) })).status).toBe(401);
    expect((await call("/auth/me", { headers: bearer(member.apiKey) })).status).toBe(401);
    const login = await call("/auth/login", form({ username: member.username, password: member.password }));
    // The same answer as a wrong password (issue 11, item 13): a suspended login confirms nothing.
    expect([login.status, await login.json()]).toEqual([401, { detail: "Incorrect username or password" }]);

    await call(
      "/admin/users/change",
      form({ user_id: member.userId, suspended: "false" }, bearer(org.owner.token), "PUT"),
    );
    expect((await call("/auth/me", { headers: bearer(member.apiKey) })).status).toBe(200);
  });

  it("deletes a user, whose token and keys stop working at once", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const deleted = await call("/admin/users", form({ user_id: member.userId }, bearer(org.owner.token), "DELETE"));
    expect(deleted.status).toBe(200);
    expect((await call("/auth/me", { headers: bearer(member.token) })).status).toBe(401);
    expect((await call("/auth/me", { headers: bearer(member.apiKey) })).status).toBe(401);
  });

  it("hands ownership over: the new owner is owner, the old one admin", async () => {
    const org = await seedOrg();
    const admin = await org.addMember("admin");
    const handed = await call("/admin/owner/change", form({ user_id: admin.userId }, bearer(org.owner.token), "PUT"));
    expect(handed.status).toBe(200);
    const users = (await body(await call("/admin/users", { headers: bearer(admin.token) }))).users as Json[];
    expect(users.find((u) => u._id === admin.userId)?.role).toBe("owner");
    expect(users.find((u) => u._id === org.owner.userId)?.role).toBe("admin");
    // The old owner can no longer hand ownership on.
    const again = await call("/admin/owner/change", form({ user_id: admin.userId }, bearer(org.owner.token), "PUT"));
    expect(again.status).toBe(403);
  });

  it("records every admin action in an audit log the owner reads, newest first", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    await call("/admin/users/change", form({ user_id: member.userId, role: "viewer" }, bearer(org.owner.token), "PUT"));
    await call(
      "/admin/connections/create",
      form({ name: "openai", kind: "openai", secret: "sk-audit-secret-9999" }, bearer(org.owner.token)),
    );
    const log = await call("/admin/audit-log", { headers: bearer(org.owner.token) });
    expect(log.status).toBe(200);
    const entries = (await body(log)).entries as Json[];
    const actions = entries.filter((e) => e.actorId === org.owner.userId).map((e) => e.action);
    expect(actions.slice(0, 3)).toEqual(["connection.create", "user.change", "user.add"]);
    expect(entries[1]).toMatchObject({ actorId: org.owner.userId, targetId: member.userId, targetType: "user" });
    expect(JSON.stringify(entries)).not.toContain("sk-audit-secret-9999");
  });
});
