import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, json, seedOrg } from "../helpers";
import { createKb, fileData, indexText, query, send } from "./kb-fixtures";
import { checkUrl, isIpLiteral } from "../../src/lib/ssrf-guard";
import { guardedFetch } from "../../src/lib/egress";
import { parseArxivRef, parseWikipediaRef, parseYoutubeRef } from "../../src/features/knowledge-bases/sources";

const ID = "0123456789abcdef01234567";

const routes = (kb: string, doc: string): [string, string, unknown?][] => [
  ["GET", `/v1/knowledge-base?id=${kb}`],
  ["GET", `/v1/knowledge-base/${kb}/documents`],
  ["DELETE", `/v1/knowledge-base/${kb}/documents?document_ids=${doc}`],
  ["POST", `/v1/knowledge-base/${kb}/index`, fileData("x.txt", "text/plain", "intruder text")],
  ["POST", `/v1/knowledge-base/${kb}/query`, { queries: ["secret"] }],
  ["DELETE", `/v1/knowledge-base/${kb}`],
];

describe("knowledge bases: authentication", () => {
  it("answers Group A's 401 bodies on every route", async () => {
    for (const [method, path, body] of [...routes(ID, ID), ["POST", "/v1/knowledge-base", { name: "x" }] as [string, string, unknown], ["GET", "/v1/knowledge-bases"] as [string, string]]) {
      const init = body ? { ...json(body), method } : { method };
      const none = await call(path, init);
      expect(none.status).toBe(401);
      expect(await none.json()).toEqual({ error: "Missing authorization header" });
      const malformed = await call(path, { ...init, headers: { ...(init.headers ?? {}), authorization: "Token abc" } });
      expect(await malformed.json()).toEqual({ error: "Invalid authorization header format" });
      const wrong = await call(path, { ...init, headers: { ...(init.headers ?? {}), authorization: "Bearer sk_wrong" } });
      expect(wrong.status).toBe(401);
      expect(await wrong.json()).toEqual({ error: "Invalid API key" });
    }
  });
});

describe("knowledge bases: tenancy", () => {
  it("answers 404 to another organization on every route and changes nothing", async () => {
    const owner = await seedOrg();
    const intruder = await seedOrg();
    const kb = await createKb(owner.owner.apiKey, { name: "private-kb" });
    const doc = await indexText(owner.owner.apiKey, kb, "secret.txt", "The secret launch code is hidden here.");
    for (const [method, path, body] of routes(kb, doc)) {
      const res = await send(path, intruder.owner.apiKey, body ? { ...json(body), method } : { method });
      expect(res, `${method} ${path}`).toEqual({ status: 404, body: { status: "failed", error: "knowledge base not found" } });
    }
    expect((await send(`/v1/knowledge-base?name=private-kb`, intruder.owner.apiKey)).status).toBe(404);
    expect((await send(`/v1/knowledge-base?name=private-kb&org_name=${encodeURIComponent(owner.name)}`, intruder.owner.apiKey)).status).toBe(404);
    expect((await send("/v1/knowledge-bases?include_shared=true", intruder.owner.apiKey)).body.object_ids).toEqual([]);
    // The owner's data is intact.
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, owner.owner.apiKey)).body.documents as { _id: string }[];
    expect(docs.map((d) => d._id)).toEqual([doc]);
    const q = await query(owner.owner.apiKey, kb, { queries: ["launch code"] });
    expect(q.items[0].document_id).toBe(doc);
  });

  it("never lets a filter reach chunks of another knowledge base", async () => {
    const owner = await seedOrg();
    const kbA = await createKb(owner.owner.apiKey);
    const kbB = await createKb(owner.owner.apiKey);
    const docB = await indexText(owner.owner.apiKey, kbB, "b.txt", "Only in knowledge base B.");
    const q = await query(owner.owner.apiKey, kbA, { queries: ["knowledge base B"], search_metadata: { filter: JSON.stringify({ must: [{ key: "document_id", match: { value: docB } }] }) } });
    expect(q.status).toBe(200);
    expect(q.items).toEqual([]);
  });

  it("keeps filter values out of SQL (injection attempts are plain values)", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    await indexText(owner.owner.apiKey, kb, "a.txt", "Ordinary text about gardens.", { topic: "x" });
    const attempts = [JSON.stringify({ must: [{ key: "topic", match: { value: "x' OR 1=1 --" } }] }), JSON.stringify({ must: [{ key: "topic') OR 1=1 --", match: { value: "x" } }] })];
    const first = await query(owner.owner.apiKey, kb, { queries: ["gardens"], search_metadata: { filter: attempts[0] } });
    expect(first.items).toEqual([]);
    const second = await query(owner.owner.apiKey, kb, { queries: ["gardens"], search_metadata: { filter: attempts[1] } });
    expect(second.status).toBe(400);
  });

  it("stores files under server-generated keys only", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    await indexText(owner.owner.apiKey, kb, "../../../other-tenant/file.txt", "Path traversal in names has no effect.");
    const listed = await env.FILES.list({ prefix: "other-tenant" });
    expect(listed.objects).toEqual([]);
  });
});

describe("knowledge bases: outside sources are fetched only through the SSRF guard", () => {
  const allow = ["*.wikipedia.org", "arxiv.org"];
  const refused: [string, RegExp][] = [
    ["http://en.wikipedia.org/wiki/Cat", /only https/],
    ["https://127.0.0.1/", /IP addresses/],
    ["https://localhost/", /not on the allow-list/],
    ["https://10.0.0.8/latest/meta-data", /IP addresses/],
    ["https://169.254.169.254/latest/meta-data", /IP addresses/],
    ["https://192.168.1.1/", /IP addresses/],
    ["https://2130706433/", /IP addresses/],
    ["https://0x7f000001/", /IP addresses/],
    ["https://0x7f.0.0.1/", /IP addresses/],
    ["https://0177.0.0.1/", /IP addresses/],
    ["https://127.1/", /IP addresses/],
    ["https://[::1]/", /IP addresses/],
    ["https://[::ffff:127.0.0.1]/", /IP addresses/],
    ["https://%31%32%37.0.0.1/", /IP addresses/],
    ["https://user:pass@en.wikipedia.org/wiki/Cat", /credentials/],
    ["https://en.wikipedia.org.evil.com/wiki/Cat", /not on the allow-list/],
    ["https://evilwikipedia.org/wiki/Cat", /not on the allow-list/],
    ["https://en.wikipedia.org:8443/wiki/Cat", /default https port/],
    ["file:///etc/passwd", /only https/],
    ["gopher://arxiv.org/", /only https/],
  ];
  for (const [url, reason] of refused) {
    it(`refuses ${url}`, () => {
      expect(() => checkUrl(url, allow)).toThrow(reason);
    });
  }

  it("recognises IP literals in every spelling", () => {
    for (const host of ["127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "[::1]", "::1", "017700000001"]) expect(isIpLiteral(host), host).toBe(true);
    for (const host of ["en.wikipedia.org", "arxiv.org", "1password.com"]) expect(isIpLiteral(host), host).toBe(false);
  });

  it("refuses a redirect off the allow-list and never fetches its target", async () => {
    const fetched: string[] = [];
    const fake = async (input: Request | string | URL) => {
      const url = String(input instanceof Request ? input.url : input);
      fetched.push(url);
      if (url.startsWith("https://arxiv.org/")) return new Response(null, { status: 302, headers: { location: "https://169.254.169.254/latest/meta-data" } });
      return new Response("should never be reached");
    };
    await expect(guardedFetch("https://arxiv.org/pdf/2101.00001", { allowHosts: allow, maxBytes: 1000, timeoutMs: 1000, fetch: fake })).rejects.toThrow(/IP addresses/);
    const toOtherHost = async () => new Response(null, { status: 301, headers: { location: "https://attacker.example/x" } });
    await expect(guardedFetch("https://arxiv.org/pdf/2101.00001", { allowHosts: allow, maxBytes: 1000, timeoutMs: 1000, fetch: toOtherHost })).rejects.toThrow(/not on the allow-list/);
    expect(fetched).toEqual(["https://arxiv.org/pdf/2101.00001"]);
  });

  it("follows an allow-listed redirect, and caps size and time", async () => {
    const fake = async (input: Request | string | URL) => {
      const url = String(input);
      if (url === "https://arxiv.org/pdf/1") return new Response(null, { status: 301, headers: { location: "/pdf/1v2" } });
      if (url === "https://arxiv.org/pdf/1v2") return new Response("ok");
      if (url === "https://arxiv.org/big") return new Response("x".repeat(5000));
      return new Promise<Response>(() => {});
    };
    const ok = await guardedFetch("https://arxiv.org/pdf/1", { allowHosts: allow, maxBytes: 1000, timeoutMs: 1000, fetch: fake });
    expect(new TextDecoder().decode(ok.body)).toBe("ok");
    await expect(guardedFetch("https://arxiv.org/big", { allowHosts: allow, maxBytes: 1000, timeoutMs: 1000, fetch: fake })).rejects.toThrow(/exceeds 1000 bytes/);
    const slow = async (_input: Request | string | URL, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    await expect(guardedFetch("https://arxiv.org/slow", { allowHosts: allow, maxBytes: 1000, timeoutMs: 50, fetch: slow })).rejects.toThrow(/timed out after 50 ms/);
  });

  it("refuses source references that point anywhere but their service", () => {
    expect(() => parseWikipediaRef("https://evil.example/wiki/Cat")).toThrow(/not on the allow-list/);
    expect(() => parseWikipediaRef("https://127.0.0.1/wiki/Cat")).toThrow(/IP addresses/);
    expect(() => parseYoutubeRef("https://www.youtube.com.evil.example/watch?v=dQw4w9WgXcQ")).toThrow(/not on the allow-list/);
    expect(() => parseYoutubeRef("http://www.youtube.com/watch?v=dQw4w9WgXcQ")).toThrow(/only https/);
    expect(() => parseArxivRef("https://user@arxiv.org/abs/2101.00001")).toThrow(/credentials/);
    expect(() => parseArxivRef("../../etc/passwd")).toThrow(/arXiv id/);
  });

  it("answers 400 through the API when a source URL is refused", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    for (const body of [{ encyclopedia: "https://169.254.169.254/wiki/x" }, { youtube: "https://localhost/watch?v=dQw4w9WgXcQ" }, { preprint: "https://0x7f000001/abs/2101.00001" }]) {
      const res = await send(`/v1/knowledge-base/${kb}/index`, owner.owner.apiKey, json(body));
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(String(res.body.error)).toMatch(/^refused to fetch: /);
    }
  });
});

describe("knowledge bases: the SDK's find_documents filters and apify_key", () => {
  it("a title filter matches one name exactly: injection attempts and other knowledge bases' titles find nothing", async () => {
    const owner = await seedOrg();
    const kbA = await createKb(owner.owner.apiKey);
    const kbB = await createKb(owner.owner.apiKey);
    const docA = await indexText(owner.owner.apiKey, kbA, "plans.txt", "Plans for the garden.");
    await indexText(owner.owner.apiKey, kbB, "secret.txt", "Only in knowledge base B.");
    const ids = async (kb: string, title: string) => (await send(`/v1/knowledge-base/${kb}/documents?title=${encodeURIComponent(title)}`, owner.owner.apiKey)).body.document_ids;
    expect(await ids(kbA, "plans.txt")).toEqual([docA]);
    expect(await ids(kbA, "secret.txt")).toEqual([]);
    expect(await ids(kbA, "x' OR '1'='1")).toEqual([]);
    expect(await ids(kbA, "%")).toEqual([]);
    const intruder = await seedOrg();
    expect((await send(`/v1/knowledge-base/${kbB}/documents?title=secret.txt`, intruder.owner.apiKey)).status).toBe(404);
  });

  it("a null inside a filter object is refused, never read as 'no condition' (only a filter that is itself null is unset)", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    await indexText(owner.owner.apiKey, kb, "a.txt", "Ordinary text about gardens.", { topic: "x" });
    const widened = await query(owner.owner.apiKey, kb, { queries: ["gardens"], search_metadata: { filter: { must: [{ key: "topic", match: { value: null } }] } } });
    expect(widened.status).toBe(400);
    const unset = await query(owner.owner.apiKey, kb, { queries: ["gardens"], search_metadata: { filter: null, opensearch_filter: null } });
    expect(unset.status).toBe(200);
    expect(unset.items).toHaveLength(1);
  });

  it("config.apify_key (like scraper_api_key) is never stored or echoed", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    const canary = "apify_api_CANARY7f3a9c2e1d";
    const indexed = await send(`/v1/knowledge-base/${kb}/index`, org.owner.apiKey, json({ ...fileData("a.txt", "text/plain", "Some text about birds."), config: { apify_key: canary } }));
    expect(indexed.status).toBe(200);
    const refused = await call(`/v1/knowledge-base/${kb}/index`, json({ config: { apify_key: canary, chunk_size: 0 } }, { authorization: `Bearer ${org.owner.apiKey}` }));
    expect(refused.status).toBe(400);
    const responses = [
      JSON.stringify(indexed.body),
      await refused.text(),
      await (await call(`/v1/knowledge-base/${kb}/documents`, { headers: { authorization: `Bearer ${org.owner.apiKey}` } })).text(),
      await (await call("/admin/audit-log", { headers: { authorization: `Bearer ${org.owner.token}` } })).text(),
    ];
    for (const text of responses) expect(text).not.toContain(canary);
    const stored = await env.FILES.list({ prefix: `knowledge-bases/${kb}/`, include: ["customMetadata"] });
    expect(JSON.stringify(stored.objects.map((o) => o.customMetadata))).not.toContain(canary);
  });
});
