import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { deleteFiles, listFileKeys, R2_DELETE_BATCH } from "../../src/db/files";
import { seedOrg } from "../helpers";
import { createKb, send } from "../knowledge-bases/kb-fixtures";

const under = async (prefix: string) => (await env.FILES.list({ prefix })).objects.map((o) => o.key);

describe("R2 access (src/db/files.ts): one batching policy", () => {
  it("lists page after page and deletes in batches, duplicates and nulls included, nothing outside the keys", async () => {
    const prefix = `files-test/${crypto.randomUUID()}/`;
    const keys = Array.from({ length: 25 }, (_, i) => `${prefix}${String(i).padStart(2, "0")}`);
    await Promise.all(keys.map((k) => env.FILES.put(k, "x")));
    const kept = `files-test/${crypto.randomUUID()}/kept`;
    await env.FILES.put(kept, "x");

    // Pages of 10 stand for R2's pages of 1,000 (and batches of 10 for its 1,000 keys per delete).
    expect((await listFileKeys(env, prefix, 10)).sort()).toEqual(keys);
    await deleteFiles(env, [...keys, keys[0], null, undefined, ""], 10);
    expect(await listFileKeys(env, prefix, 10)).toEqual([]);
    expect(await under(kept)).toEqual([kept]);
    await deleteFiles(env, []);
    expect(R2_DELETE_BATCH).toBe(1000);
  });

  it("deleting a knowledge base removes every original under its prefix, also one no document row names", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    // As an upload cut off between storing the original and writing its row would leave it.
    const stray = `knowledge-bases/${kb}/stray-document/original`;
    await env.FILES.put(stray, "orphaned bytes");
    expect((await send(`/v1/knowledge-base/${kb}`, org.owner.apiKey, { method: "DELETE" })).status).toBe(200);
    expect(await under(`knowledge-bases/${kb}/`)).toEqual([]);
  });
});
