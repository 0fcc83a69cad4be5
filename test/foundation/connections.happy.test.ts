import { describe, expect, it } from "vitest";
import { env } from "cloudflare:test";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { resolveConnection } from "../../src/features/connections/connections.service";

type Json = Record<string, unknown>;

describe("connections: happy paths", () => {
  it("creates, lists, updates and deletes a connection; the secret is write-only but usable by providers", async () => {
    const org = await seedOrg();
    const secret = "sk-live-CANARY-1234567890-abcd";
    const created = await call(
      "/admin/connections/create",
      form(
        {
          name: "openai",
          kind: "openai",
          secret,
          chat_model: "gpt-4o-mini",
          embedding_model: "text-embedding-3-small",
        },
        bearer(org.owner.token),
      ),
    );
    expect(created.status).toBe(200);
    const createdText = await created.text();
    expect(createdText).not.toContain(secret);
    const connection = (JSON.parse(createdText) as Json).connection as Json;
    expect(connection).toMatchObject({
      name: "openai",
      kind: "openai",
      hasSecret: true,
      secretLastFour: "abcd",
      baseUrl: "https://api.openai.com/v1",
      models: { chat: "gpt-4o-mini", embedding: "text-embedding-3-small" },
    });

    const listed = await call("/admin/connections", { headers: bearer(org.owner.token) });
    const listedText = await listed.text();
    expect(listedText).not.toContain(secret);
    expect(((JSON.parse(listedText) as Json).connections as Json[]).map((c) => c.name)).toEqual(["openai"]);

    // Stored encrypted: the raw row does not contain the secret.
    const raw = await env.DB.prepare("SELECT * FROM connections WHERE id = ?").bind(connection._id).first();
    expect(JSON.stringify(raw)).not.toContain(secret);
    const resolved = await resolveConnection(env, org.orgId, "openai");
    expect(resolved?.secret).toBe(secret);

    const updated = await call("/admin/connections/update", {
      method: "PATCH",
      headers: { "content-type": "application/json", ...bearer(org.owner.token) },
      body: JSON.stringify({
        connection_id: connection._id,
        base_url: "http://127.0.0.1:11434/v1",
        models: { chat: "llama3" },
        secret: "new-secret-wxyz",
      }),
    });
    expect(updated.status).toBe(200);
    expect(((await updated.json()) as Json).connection).toMatchObject({
      baseUrl: "http://127.0.0.1:11434/v1",
      secretLastFour: "wxyz",
      models: { chat: "llama3", embedding: "text-embedding-3-small" },
    });
    expect((await resolveConnection(env, org.orgId, "openai"))?.secret).toBe("new-secret-wxyz");

    const deleted = await call(
      "/admin/connections/delete",
      form({ connection_id: String(connection._id) }, bearer(org.owner.token), "DELETE"),
    );
    expect(deleted.status).toBe(200);
    expect(await resolveConnection(env, org.orgId, "openai")).toBeNull();
  });

  it("accepts JSON bodies as well as forms", async () => {
    const org = await seedOrg();
    const created = await call(
      "/admin/connections/create",
      json(
        {
          name: "claude",
          kind: "anthropic",
          api_key: "ant-key-0000",
          base_url: "https://api.anthropic.com",
          models: { chat: "claude-sonnet-4-5" },
        },
        bearer(org.owner.token),
      ),
    );
    expect(created.status).toBe(200);
    expect(((await created.json()) as Json).connection).toMatchObject({
      kind: "anthropic",
      hasSecret: true,
      models: { chat: "claude-sonnet-4-5" },
    });
  });
});
