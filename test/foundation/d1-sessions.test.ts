import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, callWith, json, seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";

/**
 * D1's Sessions API (src/db/client.ts readNearest): the API-key lookup and a query's knowledge-base
 * lookup read through `withSession("first-unconstrained")`, which may answer from a read replica.
 * Local D1 has no replicas, so the binding is wrapped the way a deployment's would behave: every
 * session is recorded, and the "replica" either is the database itself or lags behind it.
 */
type Replica = "current" | "behind";

function sessionRecordingDb(replica: Replica): { db: D1Database; sessions: string[] } {
  const sessions: string[] = [];
  const real = env.DB;
  const db: D1Database = {
    prepare: (query) => real.prepare(query),
    batch: (statements) => real.batch(statements),
    exec: (query) => real.exec(query),
    dump: () => real.dump(),
    withSession: (constraint) => {
      sessions.push(String(constraint));
      const session = real.withSession(constraint);
      if (replica === "current") return session;
      // A replica that has not received the rows yet: the same statement, with the same
      // parameters, answering the same columns and no rows.
      return {
        prepare: (query: string) => session.prepare(`SELECT * FROM (${query}) WHERE 0`),
        batch: (statements: D1PreparedStatement[]) => session.batch(statements),
        getBookmark: () => session.getBookmark(),
      };
    },
  };
  return { db, sessions };
}

async function askKb(db: D1Database, key: string, kb: string): Promise<Response> {
  return callWith(
    { DB: db, D1_READ_REPLICAS: "on" },
    `/v1/knowledge-base/${kb}/query`,
    json({ queries: ["tidal energy"], search_metadata: { top_k: 3 } }, bearer(key)),
  );
}

describe("D1 sessions: reads that may come from a replica", () => {
  it("reads the API key and the queried knowledge base through a session; writes stay on the primary", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(key, kb, "tides.txt", "Tidal energy turns the rise and fall of the sea into electricity.");
    const { db, sessions } = sessionRecordingDb("current");
    const res = await askKb(db, key, kb);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { chunks: { text: string }[] } };
    expect(body.result.chunks[0].text).toContain("Tidal energy");
    // The key lookup and the knowledge-base lookup: two sessions, both allowed to use a replica.
    expect(sessions).toEqual(["first-unconstrained", "first-unconstrained"]);

    // Creating a knowledge base (a write, and its read-your-writes checks) opens no session.
    const writes = sessionRecordingDb("current");
    const created = await callWith(
      { DB: writes.db, D1_READ_REPLICAS: "on" },
      "/v1/knowledge-base",
      json({ name: "primary-only" }, bearer(key)),
    );
    expect(created.status).toBe(200);
    expect(writes.sessions).toEqual(["first-unconstrained"]);
  });

  it("a key or knowledge base the replica does not have yet is read from the primary, not refused", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(key, kb, "tides.txt", "Tidal energy turns the rise and fall of the sea into electricity.");
    const { db, sessions } = sessionRecordingDb("behind");
    const res = await askKb(db, key, kb);
    expect(res.status).toBe(200);
    expect(sessions).toEqual(["first-unconstrained", "first-unconstrained"]);
    // A key that exists nowhere is still refused after both reads.
    const refused = await askKb(db, "sk_0000000000000000000000000000000000000000000000000000000000000000", kb);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: "Invalid API key" });
  });

  it("opens no session unless D1_READ_REPLICAS is on (a database without replicas gains nothing from one)", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const { db, sessions } = sessionRecordingDb("current");
    const res = await callWith(
      { DB: db },
      `/v1/knowledge-base/${kb}/query`,
      json({ queries: ["tidal energy"], search_metadata: { top_k: 3 } }, bearer(key)),
    );
    expect(res.status).toBe(200);
    expect(sessions).toEqual([]);
  });
});
