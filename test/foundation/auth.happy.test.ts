import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";

describe("auth: happy paths", () => {
  it("signs up, logs in with email or username, and reads the current user", async () => {
    const org = await seedOrg();
    const me = await call("/auth/me", { headers: bearer(org.owner.token) });
    expect(me.status).toBe(200);
    const body = (await me.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      _id: org.owner.userId,
      email: org.owner.email,
      role: "owner",
      organization: org.name,
    });
    expect(JSON.stringify(body)).not.toContain("password");

    const byEmail = await call("/auth/login", form({ username: org.owner.email, password: org.owner.password }));
    expect(byEmail.status).toBe(200);
    expect(await byEmail.json()).toMatchObject({ token_type: "bearer" });
  });

  it("creates an API key shown once, lists it without the secret, and revokes it at once", async () => {
    const org = await seedOrg();
    const created = await call("/auth/api-keys", json({ name: "ci" }, bearer(org.owner.token)));
    expect(created.status).toBe(201);
    const key = (await created.json()) as { id: string; name: string; key: string };
    expect(key.key).toMatch(/^sk_[0-9a-f]{48}$/);
    expect(key.id).toMatch(/^[0-9a-f]{24}$/);

    const list = await call("/auth/api-keys", { headers: bearer(org.owner.token) });
    const listed = JSON.stringify(await list.json());
    expect(listed).toContain(key.id);
    expect(listed).not.toContain(key.key);

    expect((await call("/auth/me", { headers: bearer(key.key) })).status).toBe(200);
    const revoked = await call(`/auth/api-keys/${key.id}`, { method: "DELETE", headers: bearer(org.owner.token) });
    expect(revoked.status).toBe(200);
    expect((await call("/auth/me", { headers: bearer(key.key) })).status).toBe(401);
  });
});
