import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, call, seedOrg } from "../helpers";
import { createKb, fileData, post, send, type Body } from "./kb-fixtures";

// The index route hashes a request's files before it reads the knowledge base (with the chunk
// settings it remembers for the base) and looks up identical documents in the record's round trip
// (index-lookup.ts). The record must still decide: another organization gets the same 404 as for
// a base that does not exist, even with a file the base holds (so no id leaks), a viewer gets 403,
// and a bad file to a base the caller cannot reach answers the 404 first, as before.

const TEXT = "Shearwaters fly thousands of kilometres to feed their chicks.";
const documents = async (key: string, kb: string) =>
  (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];

describe("knowledge bases: indexing into a base the caller may not write to, with the lookup in the record's round trip", () => {
  it("answers another organization the 404 of a missing base, a viewer 403, and adds nothing", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    // The owner's requests leave the base's chunk settings remembered, so later requests hash early.
    for (let i = 0; i < 2; i++) {
      const res = await post(
        `/v1/knowledge-base/${kb}/index`,
        owner.owner.apiKey,
        fileData("s.txt", "text/plain", TEXT),
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const [held] = (await documents(owner.owner.apiKey, kb)).map((d) => d._id);

    const intruder = await seedOrg();
    const gone = await createKb(owner.owner.apiKey);
    expect((await send(`/v1/knowledge-base/${gone}`, owner.owner.apiKey, { method: "DELETE" })).status).toBe(200);
    const missing = await post(
      `/v1/knowledge-base/${gone}/index`,
      intruder.owner.apiKey,
      fileData("s.txt", "text/plain", TEXT),
    );
    expect(missing.status).toBe(404);
    for (const body of [fileData("s.txt", "text/plain", TEXT), fileData("x.txt", "text/plain", "Petrels patter.")]) {
      const res = await post(`/v1/knowledge-base/${kb}/index`, intruder.owner.apiKey, body);
      expect(res.status).toBe(404);
      expect(res.body).toEqual(missing.body);
      expect(JSON.stringify(res.body)).not.toContain(String(held));
    }
    // A file that cannot be read, to a base of another organization: the 404 comes first.
    const bad = await post(`/v1/knowledge-base/${kb}/index`, intruder.owner.apiKey, {
      file_data: { file: { type: "file", raw_bytes: "%%% not base64 %%%", metadata: { name: "bad.txt" } } },
    });
    expect(bad.status).toBe(404);
    expect(bad.body).toEqual(missing.body);

    const viewer = await owner.addMember("viewer");
    const refused = await post(
      `/v1/knowledge-base/${kb}/index`,
      viewer.apiKey,
      fileData("v.txt", "text/plain", "Terns."),
    );
    expect(refused.status).toBe(403);
    const member = await owner.addMember("member");
    const notOwner = await post(`/v1/knowledge-base/${kb}/index`, member.apiKey, fileData("m.txt", "text/plain", TEXT));
    expect(notOwner.status).toBe(403);

    expect(await documents(owner.owner.apiKey, kb)).toHaveLength(1);
  });
});

describe("knowledge bases: the record read in the API key's round trip (route prefetch)", () => {
  it("reaches nobody without a valid key: a revoked key and a suspended member get 401, nothing written; the key's own organization and role decide", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    const member = await org.addMember("member");
    const own = await createKb(member.apiKey);
    // Read with the key in one D1 batch, the member's organization and role must be their own.
    const mine = await post(`/v1/knowledge-base/${own}/index`, member.apiKey, fileData("m.txt", "text/plain", TEXT));
    expect(mine.status, JSON.stringify(mine.body)).toBe(200);
    const theirs = await post(`/v1/knowledge-base/${kb}/index`, member.apiKey, fileData("o.txt", "text/plain", TEXT));
    expect(theirs.status).toBe(403);

    await call("/admin/users/change", {
      method: "PUT",
      headers: { ...bearer(org.owner.token), "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ user_id: member.userId, suspended: "true" }).toString(),
    });
    const suspended = await post(
      `/v1/knowledge-base/${own}/index`,
      member.apiKey,
      fileData("s.txt", "text/plain", "Auks."),
    );
    expect(suspended.status).toBe(401);

    const keys = (await (await call("/auth/api-keys", { headers: bearer(org.owner.token) })).json()) as {
      api_keys: { id: string }[];
    };
    await call(`/auth/api-keys/${keys.api_keys[0].id}`, { method: "DELETE", headers: bearer(org.owner.token) });
    const revoked = await post(
      `/v1/knowledge-base/${kb}/index`,
      org.owner.apiKey,
      fileData("r.txt", "text/plain", "Auks."),
    );
    expect(revoked.status).toBe(401);
    expect(revoked.body).toEqual({ error: "Invalid API key" });

    const unsigned = await call(`/v1/knowledge-base/${kb}/index`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(fileData("u.txt", "text/plain", "Auks.")),
    });
    expect(unsigned.status).toBe(401);
    const rows = await env.DB.prepare("SELECT kb_id FROM kb_documents WHERE kb_id IN (?, ?)").bind(kb, own).all();
    expect(rows.results).toEqual([{ kb_id: own }]);
  });
  it("on the query route: another organization gets the 404 of a missing base, a viewer of the same one its answer, a revoked key 401", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    expect(
      (await post(`/v1/knowledge-base/${kb}/index`, org.owner.apiKey, fileData("s.txt", "text/plain", TEXT))).status,
    ).toBe(200);
    const ask = { queries: ["shearwaters chicks"] };
    const answer = await post(`/v1/knowledge-base/${kb}/query`, org.owner.apiKey, ask);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const viewer = await org.addMember("viewer");
    const seen = await post(`/v1/knowledge-base/${kb}/query`, viewer.apiKey, ask);
    expect(seen).toEqual(answer);

    // Read by the path's id alone with the key, the record must still be the caller's organization's.
    const intruder = await seedOrg();
    const gone = await createKb(org.owner.apiKey);
    expect((await send(`/v1/knowledge-base/${gone}`, org.owner.apiKey, { method: "DELETE" })).status).toBe(200);
    const missing = await post(`/v1/knowledge-base/${gone}/query`, intruder.owner.apiKey, ask);
    const foreign = await post(`/v1/knowledge-base/${kb}/query`, intruder.owner.apiKey, ask);
    expect(missing.status).toBe(404);
    expect(foreign).toEqual({
      status: 404,
      body: { ...missing.body, error: String(missing.body.error).replace(gone, kb) },
    });

    const keys = (await (await call("/auth/api-keys", { headers: bearer(org.owner.token) })).json()) as {
      api_keys: { id: string }[];
    };
    await call(`/auth/api-keys/${keys.api_keys[0].id}`, { method: "DELETE", headers: bearer(org.owner.token) });
    const revoked = await post(`/v1/knowledge-base/${kb}/query`, org.owner.apiKey, ask);
    expect(revoked).toEqual({ status: 401, body: { error: "Invalid API key" } });
  });
});
