import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { b64, createKb, post, send, type Body } from "./kb-fixtures";
import type { KnowledgeBaseIndex } from "../../src/features/knowledge-bases/index/knowledge-base-index";
import { readOriginal } from "../../src/features/knowledge-bases/originals";
import { recordDocuments, statementSpec } from "../../src/features/knowledge-bases/documents.repository";
import { auditInsert, auditInsertSpec } from "../../src/features/audit/audit.service";

// Issue 14, fifth round: concurrent batch requests written as one group by the index object, whose
// bookkeeping (`finished` rows, pending audit entries, the items lookup) is now one statement per
// group rather than one per document.

const kbStub = (kb: string) =>
  env.KB_INDEX.get(env.KB_INDEX.idFromName(kb)) as unknown as DurableObjectStub<KnowledgeBaseIndex>;
const file = (name: string, text: string, mime = "text/plain") => ({
  file: { type: "file", raw_bytes: b64(text), metadata: { name, mime_type: mime } },
});
const documents = async (key: string, kb: string) =>
  (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
const bookkeeping = (kb: string) =>
  runInDurableObject(kbStub(kb), (_instance, state) => ({
    finished: state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM finished").one().n,
    audits: state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending_audits").one().n,
  }));
const batch = (request: number, size: number) =>
  Array.from({ length: size }, (_, i) =>
    file(`batch-${request}-${i}.txt`, `Request ${request} file ${i} reports tide gauge ${request * 10 + i}.`),
  );

describe("knowledge bases: concurrent small-document batches", () => {
  it("answers each concurrent batch with its own ids in order, and the next group drops what D1 has in bulk", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const answers = await Promise.all(
      [0, 1, 2, 3].map((r) => post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(r, 4) })),
    );
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(16);
    for (const [r, res] of answers.entries()) {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const ids = res.body.document_ids as string[];
      expect(ids).toHaveLength(4);
      for (const [i, id] of ids.entries())
        expect(docs.find((d) => d._id === id)).toMatchObject({
          name: `batch-${r}-${i}.txt`,
          status: "ready",
          chunkCount: 1,
        });
    }
    // Answered means D1 has the rows; the next group's transaction drops their `finished` rows and
    // audit entries, leaving only its own (kept until D1 has them).
    const next = await post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(9, 2) });
    expect(next.status).toBe(200);
    expect(await bookkeeping(kb)).toEqual({ finished: 2, audits: 1 });
    // The alarm writes nothing twice and then drops the rest.
    await runDurableObjectAlarm(kbStub(kb));
    expect(await bookkeeping(kb)).toEqual({ finished: 0, audits: 0 });
    expect(await documents(key, kb)).toHaveLength(18);
    const audits = await env.DB.prepare(
      "SELECT count(*) AS n FROM audit_log WHERE org_id = ? AND action = 'knowledge_base.index'",
    )
      .bind(org.orgId)
      .first<{ n: number }>();
    expect(audits?.n).toBe(5);
    expect(await kbStub(kb).stats()).toMatchObject({ chunks: 18, vectors: 18, pending: 0 });
  });

  it("refuses only the request holding an unreadable file when batches arrive together", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const [good, bad, alsoGood] = await Promise.all([
      post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(0, 3) }),
      post(`/v1/knowledge-base/${kb}/index`, key, {
        file_data: [...batch(1, 2), file("broken.json", "{ nope", "application/json")],
      }),
      post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(2, 3) }),
    ]);
    expect(good.status).toBe(200);
    expect(alsoGood.status).toBe(200);
    expect(bad.status).toBe(400);
    const docs = await documents(key, kb);
    expect(docs.map((d) => d.name).sort()).toEqual(
      [...batch(0, 3), ...batch(2, 3)].map((f) => f.file.metadata.name).sort(),
    );
    expect(docs.every((d) => d.status === "ready")).toBe(true);
  });

  it("sends a batch again: the same ids answered, nothing stored twice", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const first = await post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(0, 3) });
    const again = await post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(0, 3) });
    expect(again.body.document_ids).toEqual(first.body.document_ids);
    expect(await kbStub(kb).stats()).toMatchObject({ chunks: 3, vectors: 3, pending: 0 });
  });

  it("keeps a group's originals and content hashes in bulk: every original back byte for byte, each file found again by its content", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    // 45 files: more than one originals statement's worth (40), over two concurrent requests.
    const [first, second] = await Promise.all([
      post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(0, 30) }),
      post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(1, 15) }),
    ]);
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const ids = [...(first.body.document_ids as string[]), ...(second.body.document_ids as string[])];
    expect(new Set(ids).size).toBe(45);
    const texts = [
      ...Array.from({ length: 30 }, (_, i) => `Request 0 file ${i} reports tide gauge ${i}.`),
      ...Array.from({ length: 15 }, (_, i) => `Request 1 file ${i} reports tide gauge ${10 + i}.`),
    ];
    for (const [i, id] of ids.entries()) {
      const original = await readOriginal(env, kb, { id, r2Key: null });
      expect(new TextDecoder().decode(original ?? new Uint8Array()), id).toBe(texts[i]);
    }
    // The content hashes were written for all of them: the same files again answer the same ids.
    const again = await post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(1, 15) });
    expect(again.body.document_ids).toEqual(second.body.document_ids);
    expect(await kbStub(kb).stats()).toMatchObject({ chunks: 45, vectors: 45, pending: 0 });
  });

  it("writes a group's audit entries as one statement: every entry exactly as given, none doubled when written again", async () => {
    const org = await seedOrg();
    const auth = { userId: org.owner.userId, orgId: org.orgId, role: "owner" as const, via: "api_key" as const };
    const entry = (n: number) =>
      statementSpec(
        auditInsert(env, auth, {
          action: "knowledge_base.index",
          targetType: "knowledge_base",
          targetId: `kb-${n}`,
          details: { document_id: `doc-${n}`, name: `it's "${n}".txt`, source: "file" },
        }).onConflictDoNothing(),
      );
    const audits = [entry(1), entry(2), entry(3)];
    await recordDocuments(env, [], audits);
    await recordDocuments(env, [], audits);
    const rows = await env.DB.prepare(
      "SELECT id, actor_id, target_id, details FROM audit_log WHERE org_id = ? AND action = 'knowledge_base.index' ORDER BY target_id",
    )
      .bind(org.orgId)
      .all<{ id: string; actor_id: string; target_id: string; details: string }>();
    expect(rows.results).toEqual(
      audits.map((a, i) => ({
        id: a.params[0],
        actor_id: org.owner.userId,
        target_id: `kb-${i + 1}`,
        details: JSON.stringify({ document_id: `doc-${i + 1}`, name: `it's "${i + 1}".txt`, source: "file" }),
      })),
    );
  });

  it("builds the index route's audit entry without drizzle exactly as drizzle's insert ignoring a repeat, and groups it with others", async () => {
    const org = await seedOrg();
    const auth = { userId: org.owner.userId, orgId: org.orgId, role: "owner" as const, via: "api_key" as const };
    const entry = (n: number) => ({
      action: "knowledge_base.index",
      targetType: "knowledge_base",
      targetId: `kb-${n}`,
      details: { document_id: `doc-${n}`, name: `it's "${n}".txt`, source: "file" },
    });
    const drizzled = statementSpec(auditInsert(env, auth, entry(1)).onConflictDoNothing());
    const direct = auditInsertSpec(auth, entry(1));
    expect(direct.sql).toBe(drizzled.sql);
    // Same parameters but the fresh id and timestamp.
    expect([direct.params[1], ...direct.params.slice(2, 7)]).toEqual([
      drizzled.params[1],
      ...drizzled.params.slice(2, 7),
    ]);
    const audits = [auditInsertSpec(auth, entry(2)), direct, auditInsertSpec(auth, entry(3))];
    await recordDocuments(env, [], audits);
    await recordDocuments(env, [], audits);
    const rows = await env.DB.prepare(
      "SELECT id, actor_id, target_id, details, created_at FROM audit_log WHERE org_id = ? AND action = 'knowledge_base.index' ORDER BY target_id",
    )
      .bind(org.orgId)
      .all<{ id: string; actor_id: string; target_id: string; details: string; created_at: string }>();
    expect(rows.results).toEqual(
      [direct, audits[0], audits[2]].map((a, i) => ({
        id: a.params[0],
        actor_id: org.owner.userId,
        target_id: `kb-${i + 1}`,
        details: JSON.stringify(entry(i + 1).details),
        created_at: a.params[7],
      })),
    );
  });

  it("writes a call's item rows in bulk: a repeated id keeps its last text, a held id is rewritten, keyword rows follow", async () => {
    type Item = {
      id: string;
      documentId: string | null;
      position: number;
      text: string | null;
      metadata: Record<string, string>;
    };
    type Internals = { upsertItems(items: Item[]): number[] };
    const stub = kbStub(`item-rows-${crypto.randomUUID()}`);
    const item = (id: string, text: string | null): Item => ({ id, documentId: "d", position: 0, text, metadata: {} });
    const result = await runInDurableObject(stub, (instance, state) => {
      const index = instance as unknown as Internals;
      const sql = state.storage.sql;
      const first = state.storage.transactionSync(() =>
        index.upsertItems([item("a", "albatross"), item("b", "barnacle"), item("a", "anchovy")]),
      );
      const second = state.storage.transactionSync(() =>
        index.upsertItems([item("b", "bream"), item("c", "cormorant"), item("a", null)]),
      );
      const match = (word: string) =>
        sql
          .exec<{ id: string }>(
            "SELECT items.id FROM items_fts JOIN items ON items.rowid = items_fts.rowid WHERE items_fts MATCH ? ORDER BY items.id",
            word,
          )
          .toArray()
          .map((r) => r.id);
      return {
        first,
        second,
        rows: sql
          .exec<{ id: string; text: string | null; tokens: number | null }>(
            "SELECT id, text, tokens FROM items ORDER BY id",
          )
          .toArray(),
        keywordRows: sql.exec<{ n: number }>("SELECT count(*) AS n FROM items_fts").one().n,
        words: ["albatross", "anchovy", "barnacle", "bream", "cormorant"].map((w) => match(w)),
      };
    });
    expect(result.first[2]).toBe(result.first[0]);
    expect(result.second).toEqual([result.first[1], expect.any(Number), result.first[0]]);
    expect(result.rows).toEqual([
      { id: "a", text: null, tokens: null },
      { id: "b", text: "bream", tokens: 1 },
      { id: "c", text: "cormorant", tokens: 1 },
    ]);
    expect(result.keywordRows).toBe(2);
    expect(result.words).toEqual([[], [], [], ["b"], ["c"]]);
  });
});

describe("knowledge bases: the checks after a group is written, shared by its callers", () => {
  it("schedules the split at once when concurrent single-document requests pass the shard's threshold, and the split runs", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const first = await post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(0, 1) });
    expect(first.status).toBe(200);
    await kbStub(kb).configureSharding({ splitChunks: 4, batchChunks: 4 });
    const alarmIn = () =>
      runInDurableObject(
        kbStub(kb),
        async (_instance, state) => ((await state.storage.getAlarm()) ?? Infinity) - Date.now(),
      );
    // Below the threshold: only the writer's retry alarm, half a minute away.
    expect(await alarmIn()).toBeGreaterThan(10_000);
    const answers = await Promise.all(
      [1, 2, 3, 4, 5, 6, 7, 8].map((r) => post(`/v1/knowledge-base/${kb}/index`, key, { file_data: batch(r, 1) })),
    );
    for (const res of answers) expect(res.status, JSON.stringify(res.body)).toBe(200);
    // Past it: whichever call ran the checks for the last group set the alarm for now.
    expect(await alarmIn()).toBeLessThan(10_000);
    let shards = 1;
    for (let i = 0; i < 200 && shards === 1; i++) {
      await runDurableObjectAlarm(kbStub(kb));
      shards = (await kbStub(kb).shardMap()).shards.length;
    }
    expect(shards).toBeGreaterThan(1);
    expect(await documents(key, kb)).toHaveLength(9);
  });
});
