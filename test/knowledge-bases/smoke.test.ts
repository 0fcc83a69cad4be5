import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, seedCorpus, send } from "./kb-fixtures";

describe("smoke", () => {
  it("creates, indexes, queries", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const ids = await seedCorpus(key, kb);
    const docs = await send(`/v1/knowledge-base/${kb}/documents`, key);
    console.log(JSON.stringify(docs.body).slice(0, 600));
    const q = await query(key, kb, { queries: ["largest animal"] });
    console.log(q.status, JSON.stringify(q.body).slice(0, 800));
    expect(q.items[0]?.document_id).toBe(ids.whales);
  });
});
