import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, fileData, post, send, type Body } from "./kb-fixtures";
import { drizzle } from "drizzle-orm/d1";
import { eq } from "drizzle-orm";
import { knowledgeBases } from "../../src/db/schema/knowledge-bases";
import { KNOWLEDGE_BASE_BY_ID, knowledgeBaseFromColumns } from "../../src/features/knowledge-bases/index-lookup";

// The index route reads the knowledge base's record and looks up identical documents in one D1
// round trip, hashing the request's files with the chunk settings it last saw for the base
// (index-lookup.ts). These pin that the lookup answers what the separate one did, also when the
// remembered settings are out of date, and that the record still decides who may write.

const documents = async (key: string, kb: string) =>
  (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
const indexFile = (key: string, kb: string, name: string, text: string) =>
  post(`/v1/knowledge-base/${kb}/index`, key, fileData(name, "text/plain", text));

describe("knowledge bases: the record and the de-duplication lookup in one round trip", () => {
  it("answers an identical document's id, and a new document once the base's chunk settings changed", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const first = await indexFile(key, kb, "a.txt", "Gannets plunge into the sea from thirty metres.");
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const [id] = first.body.document_ids as string[];
    // The second request hashes before reading the record (the settings are remembered now).
    const again = await indexFile(key, kb, "a-again.txt", "Gannets plunge into the sea from thirty metres.");
    expect(again.body.document_ids).toEqual([id]);
    const other = await indexFile(key, kb, "b.txt", "Puffins nest in burrows on cliff tops.");
    expect((other.body.document_ids as string[])[0]).not.toBe(id);
    expect(await documents(key, kb)).toHaveLength(2);

    // The record changes under the remembered settings (as an update would): the guess is wrong,
    // so the files are hashed again with the record's settings, which make them a new document.
    await env.DB.prepare("UPDATE knowledge_bases SET chunk_size = 300, chunk_overlap = 10 WHERE id = ?").bind(kb).run();
    const changed = await indexFile(key, kb, "a-300.txt", "Gannets plunge into the sea from thirty metres.");
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    const [changedId] = changed.body.document_ids as string[];
    expect(changedId).not.toBe(id);
    const repeat = await indexFile(key, kb, "a-300-again.txt", "Gannets plunge into the sea from thirty metres.");
    expect(repeat.body.document_ids).toEqual([changedId]);
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(3);
    expect(docs.every((d) => d.status === "ready")).toBe(true);
  });

  it("answers a repeated file in a batch with the id it was given by an earlier request", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const [id] = (await indexFile(key, kb, "k.txt", "Kittiwakes cling to narrow ledges.")).body
      .document_ids as string[];
    const batch = await post(`/v1/knowledge-base/${kb}/index`, key, {
      file_data: [
        fileData("n.txt", "text/plain", "Fulmars glide low over the waves.").file_data,
        fileData("k2.txt", "text/plain", "Kittiwakes cling to narrow ledges.").file_data,
      ],
    });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const ids = batch.body.document_ids as string[];
    expect(ids[1]).toBe(id);
    expect(ids[0]).not.toBe(id);
    expect(await documents(key, kb)).toHaveLength(2);
  });
});

describe("knowledge bases: the record read in the API key's statement (route prefetch)", () => {
  it("maps the knowledge base's columns exactly as drizzle's select does (booleans, numbers, text)", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const plain = await createKb(key);
    const tuned = await createKb(key, { chunk_size: 300, chunk_overlap: 20, is_hybrid: false });
    for (const kb of [plain, tuned]) {
      const columns = await env.DB.prepare(KNOWLEDGE_BASE_BY_ID).bind(kb).first<Record<string, unknown>>();
      const [drizzled] = await drizzle(env.DB).select().from(knowledgeBases).where(eq(knowledgeBases.id, kb));
      expect(knowledgeBaseFromColumns(columns ?? {})).toEqual(drizzled);
    }
    expect((await drizzle(env.DB).select().from(knowledgeBases).where(eq(knowledgeBases.id, tuned)))[0]).toMatchObject({
      chunkSize: 300,
      chunkOverlap: 20,
      isHybrid: false,
    });
    // A base that does not exist: no row (the LEFT JOIN's nulls).
    expect(knowledgeBaseFromColumns({ id: null, org_id: null })).toBeUndefined();
  });

  it("indexes and queries through the one statement: the caller's own base answers, its settings applied", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key, { chunk_size: 40, chunk_overlap: 0 });
    const text = Array.from(
      { length: 12 },
      (_, i) => `Kittiwakes nest on narrow ledge ${i} while guillemots crowd the rock stacks below them all summer.`,
    ).join(" ");
    const res = await indexFile(key, kb, "cliff.txt", text);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // chunk_size 40 from the prefetched record: more than one chunk for this text.
    expect((await documents(key, kb))[0]).toMatchObject({ status: "ready" });
    expect(((await documents(key, kb))[0].chunkCount as number) > 1).toBe(true);
    const answer = await post(`/v1/knowledge-base/${kb}/query`, key, { queries: ["guillemots rock stacks"] });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });
});
