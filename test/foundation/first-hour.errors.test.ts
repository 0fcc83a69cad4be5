import { describe, expect, it } from "vitest";
import { bearer, call, json, seedOrg } from "../helpers";
import { NOT_AN_API_KEY } from "../../src/middleware/auth";

type Json = Record<string, unknown>;
const read = async (response: Response): Promise<[number, Json]> => [response.status, (await response.json()) as Json];
const JSON_AS_FORM =
  "the body is JSON but was sent as a form (content-type: application/x-www-form-urlencoded, which curl -d sets); send it with the header content-type: application/json";

describe("first-hour errors say what to do", () => {
  it("JSON sent as a form (plain curl -d) is named as such, in both groups", async () => {
    const org = await seedOrg();
    const asForm = (key: string, body: string): RequestInit => ({
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...bearer(key) },
      body,
    });
    expect(await read(await call("/v1/knowledge-base", asForm(org.owner.apiKey, '{"name":"handbook"}')))).toEqual([
      400,
      { status: "failed", error: JSON_AS_FORM },
    ]);
    expect(await read(await call("/auth/api-keys", asForm(org.owner.token, '{"name":"laptop"}')))).toEqual([
      400,
      { detail: JSON_AS_FORM },
    ]);
    // A real form still works, and so does the same JSON labelled as JSON.
    expect((await call("/auth/api-keys", asForm(org.owner.token, "name=laptop"))).ok).toBe(true);
    expect((await call("/v1/knowledge-base", json({ name: "handbook" }, bearer(org.owner.apiKey)))).ok).toBe(true);
  });

  it("an access token on /v1 answers a 401 {error} that says /v1 takes an API key from POST /auth/api-keys", async () => {
    const org = await seedOrg();
    const [status, body] = await read(await call("/v1/knowledge-bases", { headers: bearer(org.owner.token) }));
    expect([status, body]).toEqual([401, { error: NOT_AN_API_KEY }]);
    expect(NOT_AN_API_KEY).toContain("POST /auth/api-keys");
    // An unknown sk_ key keeps the contract's exact sentence.
    expect(await read(await call("/v1/knowledge-bases", { headers: bearer("sk_not_a_real_key") }))).toEqual([
      401,
      { error: "Invalid API key" },
    ]);
  });

  it("a file with neither a type nor a name says where the name goes", async () => {
    const org = await seedOrg();
    const { id } = (await (
      await call("/v1/knowledge-base", json({ name: "kb" }, bearer(org.owner.apiKey)))
    ).json()) as { id: string };
    // The natural guesses: the name beside raw_bytes and under file_data.
    const body = {
      file_data: { name: "notes.txt", mime_type: "text/plain", file: { raw_bytes: btoa("hello"), name: "notes.txt" } },
    };
    const [status, answer] = await read(
      await call(`/v1/knowledge-base/${id}/index`, json(body, bearer(org.owner.apiKey))),
    );
    expect(status).toBe(400);
    expect(answer.error).toContain("unsupported file type: unknown");
    expect(answer.error).toContain("file_data.file.metadata.name");
  });

  it("an API key's lastUsedAt is recorded when it is used", async () => {
    const org = await seedOrg();
    const before = (await (await call("/auth/api-keys", { headers: bearer(org.owner.token) })).json()) as {
      api_keys: { lastUsedAt: string | null }[];
    };
    expect(before.api_keys.map((k) => k.lastUsedAt)).toEqual([null]);
    expect((await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).status).toBe(200);
    expect((await call("/v1/knowledge-bases", { headers: bearer(org.owner.apiKey) })).status).toBe(200);
    const after = (await (await call("/auth/api-keys", { headers: bearer(org.owner.token) })).json()) as {
      api_keys: { lastUsedAt: string | null }[];
    };
    expect(after.api_keys).toHaveLength(1);
    expect(Number.isNaN(Date.parse(after.api_keys[0].lastUsedAt ?? ""))).toBe(false);
  });
});
