import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, json, seedOrg } from "../helpers";
import { createKb, fileData, indexText, post, query, send, type Body } from "./kb-fixtures";
import { checkUrl, isIpLiteral } from "../../src/lib/ssrf-guard";
import { guardedFetch } from "../../src/lib/egress";
import { parseArxivRef, parseWikipediaRef, parseYoutubeRef } from "../../src/features/knowledge-bases/sources";
import { extractText } from "../../src/features/knowledge-bases/extract-text";
import { pdfToPages } from "../../src/features/knowledge-bases/parsing/pdf-text";
import { indexIntoKnowledgeBase } from "../../src/features/knowledge-bases/index-request";
import {
  parseCpuMs,
  parserPlacement,
  readDocumentText,
} from "../../src/features/knowledge-bases/parsing/document-parser";
import { htmlToText } from "../../src/features/knowledge-bases/parsing/markup";
import { docxBomb, makeZip, pdfWithFlateStream } from "./hostile-files";
import { makeDocx, makePdf } from "./documents";

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
    for (const [method, path, body] of [
      ...routes(ID, ID),
      ["POST", "/v1/knowledge-base", { name: "x" }] as [string, string, unknown],
      ["GET", "/v1/knowledge-bases"] as [string, string],
    ]) {
      const init = body ? { ...json(body), method } : { method };
      const none = await call(path, init);
      expect(none.status).toBe(401);
      expect(await none.json()).toEqual({ error: "Missing authorization header" });
      const malformed = await call(path, { ...init, headers: { ...(init.headers ?? {}), authorization: "Token abc" } });
      expect(await malformed.json()).toEqual({ error: "Invalid authorization header format" });
      const wrong = await call(path, {
        ...init,
        headers: { ...(init.headers ?? {}), authorization: "Bearer sk_wrong" },
      });
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
      expect(res, `${method} ${path}`).toEqual({
        status: 404,
        body: { status: "failed", error: "knowledge base not found" },
      });
    }
    expect((await send(`/v1/knowledge-base?name=private-kb`, intruder.owner.apiKey)).status).toBe(404);
    expect(
      (
        await send(
          `/v1/knowledge-base?name=private-kb&org_name=${encodeURIComponent(owner.name)}`,
          intruder.owner.apiKey,
        )
      ).status,
    ).toBe(404);
    expect((await send("/v1/knowledge-bases?include_shared=true", intruder.owner.apiKey)).body.object_ids).toEqual([]);
    // The owner's data is intact.
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, owner.owner.apiKey)).body.documents as {
      _id: string;
    }[];
    expect(docs.map((d) => d._id)).toEqual([doc]);
    const q = await query(owner.owner.apiKey, kb, { queries: ["launch code"] });
    expect(q.items[0].document_id).toBe(doc);
  });

  it("never lets a filter reach chunks of another knowledge base", async () => {
    const owner = await seedOrg();
    const kbA = await createKb(owner.owner.apiKey);
    const kbB = await createKb(owner.owner.apiKey);
    const docB = await indexText(owner.owner.apiKey, kbB, "b.txt", "Only in knowledge base B.");
    const q = await query(owner.owner.apiKey, kbA, {
      queries: ["knowledge base B"],
      search_metadata: { filter: JSON.stringify({ must: [{ key: "document_id", match: { value: docB } }] }) },
    });
    expect(q.status).toBe(200);
    expect(q.items).toEqual([]);
  });

  it("keeps filter values out of SQL (injection attempts are plain values)", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    await indexText(owner.owner.apiKey, kb, "a.txt", "Ordinary text about gardens.", { topic: "x" });
    const attempts = [
      JSON.stringify({ must: [{ key: "topic", match: { value: "x' OR 1=1 --" } }] }),
      JSON.stringify({ must: [{ key: "topic') OR 1=1 --", match: { value: "x" } }] }),
    ];
    const first = await query(owner.owner.apiKey, kb, {
      queries: ["gardens"],
      search_metadata: { filter: attempts[0] },
    });
    expect(first.items).toEqual([]);
    const second = await query(owner.owner.apiKey, kb, {
      queries: ["gardens"],
      search_metadata: { filter: attempts[1] },
    });
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
    for (const host of ["127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "[::1]", "::1", "017700000001"])
      expect(isIpLiteral(host), host).toBe(true);
    for (const host of ["en.wikipedia.org", "arxiv.org", "1password.com"]) expect(isIpLiteral(host), host).toBe(false);
  });

  it("refuses a redirect off the allow-list and never fetches its target", async () => {
    const fetched: string[] = [];
    const fake = async (input: Request | string | URL) => {
      const url = String(input instanceof Request ? input.url : input);
      fetched.push(url);
      if (url.startsWith("https://arxiv.org/"))
        return new Response(null, { status: 302, headers: { location: "https://169.254.169.254/latest/meta-data" } });
      return new Response("should never be reached");
    };
    await expect(
      guardedFetch("https://arxiv.org/pdf/2101.00001", {
        allowHosts: allow,
        maxBytes: 1000,
        timeoutMs: 1000,
        fetch: fake,
      }),
    ).rejects.toThrow(/IP addresses/);
    const toOtherHost = async () =>
      new Response(null, { status: 301, headers: { location: "https://attacker.example/x" } });
    await expect(
      guardedFetch("https://arxiv.org/pdf/2101.00001", {
        allowHosts: allow,
        maxBytes: 1000,
        timeoutMs: 1000,
        fetch: toOtherHost,
      }),
    ).rejects.toThrow(/not on the allow-list/);
    expect(fetched).toEqual(["https://arxiv.org/pdf/2101.00001"]);
  });

  it("follows an allow-listed redirect, and caps size and time", async () => {
    const fake = async (input: Request | string | URL) => {
      const url = String(input);
      if (url === "https://arxiv.org/pdf/1")
        return new Response(null, { status: 301, headers: { location: "/pdf/1v2" } });
      if (url === "https://arxiv.org/pdf/1v2") return new Response("ok");
      if (url === "https://arxiv.org/big") return new Response("x".repeat(5000));
      return new Promise<Response>(() => {});
    };
    const ok = await guardedFetch("https://arxiv.org/pdf/1", {
      allowHosts: allow,
      maxBytes: 1000,
      timeoutMs: 1000,
      fetch: fake,
    });
    expect(new TextDecoder().decode(ok.body)).toBe("ok");
    await expect(
      guardedFetch("https://arxiv.org/big", { allowHosts: allow, maxBytes: 1000, timeoutMs: 1000, fetch: fake }),
    ).rejects.toThrow(/exceeds 1000 bytes/);
    const slow = async (_input: Request | string | URL, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) =>
        init?.signal?.addEventListener("abort", () => reject(new Error("aborted"))),
      );
    await expect(
      guardedFetch("https://arxiv.org/slow", { allowHosts: allow, maxBytes: 1000, timeoutMs: 50, fetch: slow }),
    ).rejects.toThrow(/timed out after 50 ms/);
  });

  it("refuses source references that point anywhere but their service", () => {
    expect(() => parseWikipediaRef("https://evil.example/wiki/Cat")).toThrow(/not on the allow-list/);
    expect(() => parseWikipediaRef("https://127.0.0.1/wiki/Cat")).toThrow(/IP addresses/);
    expect(() => parseYoutubeRef("https://www.youtube.com.evil.example/watch?v=dQw4w9WgXcQ")).toThrow(
      /not on the allow-list/,
    );
    expect(() => parseYoutubeRef("http://www.youtube.com/watch?v=dQw4w9WgXcQ")).toThrow(/only https/);
    expect(() => parseArxivRef("https://user@arxiv.org/abs/2101.00001")).toThrow(/credentials/);
    expect(() => parseArxivRef("../../etc/passwd")).toThrow(/arXiv id/);
  });

  it("answers 400 through the API when a source URL is refused", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    for (const body of [
      { encyclopedia: "https://169.254.169.254/wiki/x" },
      { youtube: "https://localhost/watch?v=dQw4w9WgXcQ" },
      { preprint: "https://0x7f000001/abs/2101.00001" },
    ]) {
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
    const ids = async (kb: string, title: string) =>
      (await send(`/v1/knowledge-base/${kb}/documents?title=${encodeURIComponent(title)}`, owner.owner.apiKey)).body
        .document_ids;
    expect(await ids(kbA, "plans.txt")).toEqual([docA]);
    expect(await ids(kbA, "secret.txt")).toEqual([]);
    expect(await ids(kbA, "x' OR '1'='1")).toEqual([]);
    expect(await ids(kbA, "%")).toEqual([]);
    const intruder = await seedOrg();
    expect((await send(`/v1/knowledge-base/${kbB}/documents?title=secret.txt`, intruder.owner.apiKey)).status).toBe(
      404,
    );
  });

  it("a null inside a filter object is refused, never read as 'no condition' (only a filter that is itself null is unset)", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    await indexText(owner.owner.apiKey, kb, "a.txt", "Ordinary text about gardens.", { topic: "x" });
    const widened = await query(owner.owner.apiKey, kb, {
      queries: ["gardens"],
      search_metadata: { filter: { must: [{ key: "topic", match: { value: null } }] } },
    });
    expect(widened.status).toBe(400);
    const unset = await query(owner.owner.apiKey, kb, {
      queries: ["gardens"],
      search_metadata: { filter: null, opensearch_filter: null },
    });
    expect(unset.status).toBe(200);
    expect(unset.items).toHaveLength(1);
  });

  it("config.apify_key (like scraper_api_key) is never stored or echoed", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    const canary = "apify_api_CANARY7f3a9c2e1d";
    const indexed = await send(
      `/v1/knowledge-base/${kb}/index`,
      org.owner.apiKey,
      json({ ...fileData("a.txt", "text/plain", "Some text about birds."), config: { apify_key: canary } }),
    );
    expect(indexed.status).toBe(200);
    const refused = await call(
      `/v1/knowledge-base/${kb}/index`,
      json({ config: { apify_key: canary, chunk_size: 0 } }, { authorization: `Bearer ${org.owner.apiKey}` }),
    );
    expect(refused.status).toBe(400);
    const responses = [
      JSON.stringify(indexed.body),
      await refused.text(),
      await (
        await call(`/v1/knowledge-base/${kb}/documents`, { headers: { authorization: `Bearer ${org.owner.apiKey}` } })
      ).text(),
      await (await call("/admin/audit-log", { headers: { authorization: `Bearer ${org.owner.token}` } })).text(),
    ];
    for (const text of responses) expect(text).not.toContain(canary);
    const stored = await env.FILES.list({ prefix: `knowledge-bases/${kb}/`, include: ["customMetadata"] });
    expect(JSON.stringify(stored.objects.map((o) => o.customMetadata))).not.toContain(canary);
  });
});

const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const MiB = 1024 * 1024;

/** Uploads a file and answers its document as `GET .../documents` lists it. */
/**
 * Uploads a file and answers its document; a file the request itself refuses (400 naming the
 * file, issue 14) answers `{ status: "failed", error: reason }`, after checking that nothing of it
 * was stored (no document, no original in R2).
 */
async function uploadAndList(
  key: string,
  kb: string,
  name: string,
  mime: string,
  content: string | Uint8Array,
): Promise<Body> {
  const originals = async () => (await env.FILES.list({ prefix: `knowledge-bases/${kb}/` })).objects.length;
  const before = await originals();
  const res = await post(`/v1/knowledge-base/${kb}/index`, key, fileData(name, mime, content));
  if (res.status === 200) {
    const id = (res.body.document_ids as string[])[0];
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    return docs.find((d) => d._id === id) as Body;
  }
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  const prefix = `file_data.file ('${name}') cannot be indexed: `;
  const error = String(res.body.error);
  expect(error.startsWith(prefix), error).toBe(true);
  const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
  expect(docs.some((d) => d.name === name)).toBe(false);
  expect(await originals()).toBe(before);
  return { status: res.body.status, error: error.slice(prefix.length) };
}

/** Another organization's knowledge base, ready to be queried while a hostile file is read. */
async function bystander(): Promise<() => Promise<number>> {
  const other = await seedOrg();
  const kb = await createKb(other.owner.apiKey);
  await indexText(other.owner.apiKey, kb, "tides.txt", "Tides follow the moon around the harbour.");
  return async () => {
    const res = await query(other.owner.apiKey, kb, { queries: ["harbour tides"] });
    expect(res.items.length).toBe(1);
    return res.status;
  };
}

describe("knowledge bases: hostile files (decompression bombs, nesting, runaway parsing)", () => {
  it("stops a DOCX whose zip header under-declares its document at the inflation limit, while other requests answer", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    const earlier = await indexText(key, kb, "keep.txt", "Lighthouses guide ships past the reef.");
    const otherQuery = await bystander();
    // Inflates to 160 MiB; the headers claim 1,000 bytes.
    const bomb = docxBomb(160 * MiB, 1000);
    expect(bomb.length).toBeLessThan(2 * MiB);
    const [doc, openapi, other] = await Promise.all([
      uploadAndList(key, kb, "bomb.docx", DOCX, bomb),
      call("/openapi.json"),
      otherQuery(),
    ]);
    expect(doc).toMatchObject({
      status: "failed",
      error:
        "the DOCX file inflates past 33554432 bytes (word/document.xml); Loom reads at most 33554432 bytes from an archive, whatever its headers declare",
    });
    expect(openapi.status).toBe(200);
    expect(other).toBe(200);
    // Nothing stored before is lost; the refused file leaves nothing behind (checked by uploadAndList).
    expect((await query(key, kb, { queries: ["lighthouses reef"] })).items[0].document_id).toBe(earlier);
  });

  it("refuses a zip entry past the compression ratio, and an archive listing too many entries", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    const ratio = await uploadAndList(key, kb, "ratio.docx", DOCX, docxBomb(20 * MiB, 20 * MiB));
    expect(ratio).toMatchObject({
      status: "failed",
      error:
        "the DOCX file's word/document.xml inflates to more than 100 times its compressed size; Loom reads at most 100:1",
    });
    const empty = new Uint8Array(0);
    const crowded = makeZip(
      Array.from({ length: 10_001 }, (_, i) => ({
        name: `part${i}.xml`,
        data: empty,
        method: 0 as const,
        declaredSize: 0,
      })),
    );
    const many = await uploadAndList(key, kb, "crowded.docx", DOCX, crowded);
    expect(many).toMatchObject({
      status: "failed",
      error: "the DOCX file's archive lists 10001 entries; Loom reads archives of at most 10000",
    });
  });

  it("stops a PDF whose FlateDecode stream decodes past the per-stream limit, while other requests answer", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    const otherQuery = await bystander();
    const bomb = pdfWithFlateStream(64 * MiB);
    expect(bomb.length).toBeLessThan(MiB);
    const [doc, openapi, other] = await Promise.all([
      uploadAndList(key, kb, "bomb.pdf", "application/pdf", bomb),
      call("/openapi.json"),
      otherQuery(),
    ]);
    expect(doc).toMatchObject({
      status: "failed",
      error:
        "the PDF file holds a stream that decodes past 16777216 bytes; Loom decodes at most 16777216 bytes per stream",
    });
    expect(openapi.status).toBe(200);
    expect(other).toBe(200);
  });

  it("stops a PDF whose pages decode the same stream again and again at the per-document limit", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    // 9 pages x 15 MiB: each stream is under its limit, the document is not.
    const doc = await uploadAndList(
      owner.owner.apiKey,
      kb,
      "pages.pdf",
      "application/pdf",
      pdfWithFlateStream(15 * MiB, 9),
    );
    expect(doc).toMatchObject({
      status: "failed",
      error: "the PDF file's streams decode past 134217728 bytes; Loom decodes at most 134217728 bytes per document",
    });
  });

  it("fails a deeply nested JSON file with its reason instead of a 500, and caps text that CSV or JSON would multiply", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    const nested = await uploadAndList(
      key,
      kb,
      "deep.json",
      "application/json",
      "[".repeat(200_000) + "]".repeat(200_000),
    );
    expect(nested).toMatchObject({
      status: "failed",
      error: "the JSON file nests 200000 levels deep; Loom reads at most 64",
    });
    const objects = await uploadAndList(
      key,
      kb,
      "deep-objects.json",
      "application/json",
      '{"a":'.repeat(65) + "1" + "}".repeat(65),
    );
    expect(objects).toMatchObject({
      status: "failed",
      error: "the JSON file nests 65 levels deep; Loom reads at most 64",
    });
    // A 100-character header repeated on 2,000 columns of 1,000 empty rows: 2 MB in, ~200 MB of text out.
    const header = Array.from({ length: 2000 }, (_, i) => `${"column".padEnd(96, "x")}${i}`).join(",");
    const csv = await uploadAndList(
      key,
      kb,
      "wide.csv",
      "text/csv",
      `${header}\n${`${",".repeat(1999)}x\n`.repeat(1000)}`,
    );
    expect(csv).toMatchObject({
      status: "failed",
      error: "the CSV file gives more than 33554432 characters of text; Loom reads at most 33554432",
    });
    // One 100 KB key over 50,000 leaves: every line repeats the key.
    const json = await uploadAndList(
      key,
      kb,
      "paths.json",
      "application/json",
      JSON.stringify({ ["k".repeat(100_000)]: new Array(50_000).fill(0) }),
    );
    expect(json).toMatchObject({
      status: "failed",
      error: "the JSON file gives more than 33554432 characters of text; Loom reads at most 33554432",
    });
    expect(
      await indexText(key, kb, "fine.json", JSON.stringify({ a: { b: [1, 2] } }), undefined, "application/json"),
    ).toMatch(/^[0-9a-f]{24}$/);
  });

  it("answers 400 to deeply nested custom metadata instead of a 500, and leaves no document behind", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    // Small enough for the 16 KB size limit, deep enough to overflow structured clone on the way to the index.
    const deep = JSON.parse(`${'{"a":'.repeat(2600)}1${"}".repeat(2600)}`) as Body;
    const res = await post(
      `/v1/knowledge-base/${kb}/index`,
      key,
      fileData("n.txt", "text/plain", "Nested metadata text.", deep),
    );
    expect(res).toEqual({ status: 400, body: { status: "failed", error: "request body nests deeper than 64 levels" } });
    expect((await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents).toEqual([]);
    const fine = JSON.parse(`${'{"a":'.repeat(32)}1${"}".repeat(32)}`) as Body;
    expect(
      (
        await post(
          `/v1/knowledge-base/${kb}/index`,
          key,
          fileData("n.txt", "text/plain", "Nested metadata text.", fine),
        )
      ).status,
    ).toBe(200);
  });

  it("reads markup full of unclosed tags and comments in one pass", async () => {
    const owner = await seedOrg();
    const key = owner.owner.apiKey;
    const kb = await createKb(key);
    const html = `<p>Visible harbour words</p>${"<script>".repeat(200_000)}${"<!--".repeat(200_000)}`;
    expect(await uploadAndList(key, kb, "tags.html", "text/html", html)).toMatchObject({
      status: "ready",
      chunkCount: 1,
    });
    expect((await query(key, kb, { queries: ["harbour"] })).items[0].text).toBe("Visible harbour words");
    expect(htmlToText("<".repeat(300_000))).toHaveLength(300_000);
    const runs = makeDocx("Title", ["Body text."]);
    const unclosed = await extractText(
      "docx",
      makeZip([
        {
          name: "word/document.xml",
          data: new TextEncoder().encode(`<w:p><w:r><w:t>Kept</w:t></w:r></w:p><w:p>${"<w:t x".repeat(200_000)}</w:p>`),
          method: 0,
          declaredSize: 0,
        },
      ]),
    );
    expect(unclosed.pages).toEqual(["Kept"]);
    expect((await extractText("docx", runs)).pages).toEqual(["# Title\n\nBody text."]);
  });

  it("reads PDF and zip-based files in a Dynamic Worker with a CPU budget, and applies the same limits without one", async () => {
    expect(parserPlacement(env, "pdf")).toBe("loader");
    expect(parserPlacement(env, "docx")).toBe("loader");
    expect(parserPlacement(env, "json")).toBe("inline");
    expect(parserPlacement({ ...env, LOADER: undefined }, "pdf")).toBe("inline");
    expect(parseCpuMs(env)).toBe(30_000);
    expect(parseCpuMs({ ...env, KB_PARSE_CPU_MS: "5000" })).toBe(5000);
    expect(parseCpuMs({ ...env, KB_PARSE_CPU_MS: "99999999" })).toBe(300_000);
    // The route reads through the loader: one isolate per organization, named by the parser build.
    const asked: string[] = [];
    const loader = env.LOADER as WorkerLoader;
    const recording: WorkerLoader = {
      get: (name, code) => {
        asked.push(String(name));
        return loader.get(name, code);
      },
      load: (code) => loader.load(code),
    };
    expect(
      await readDocumentText({ ...env, LOADER: recording }, "org-a", "docx", makeDocx("Title", ["Body."])),
    ).toEqual({ pages: ["# Title\n\nBody."] });
    expect(asked).toEqual([expect.stringMatching(/^loom-parser-[0-9a-f]{16}-org-a$/)]);
    // An isolate stopped by its budget fails the document with that reason.
    const stopped = {
      getEntrypoint: () => ({ fetch: () => Promise.reject(new Error("Worker exceeded CPU time limit.")) }),
    } as unknown as WorkerStub;
    const overBudget: WorkerLoader = { get: () => stopped, load: () => stopped };
    await expect(
      readDocumentText({ ...env, LOADER: overBudget, KB_PARSE_CPU_MS: "2000" }, "org-a", "pdf", makePdf(["x"])),
    ).rejects.toThrow(
      "the PDF file could not be read within the parser's limits (2000 ms of CPU, KB_PARSE_CPU_MS; 128 MB of memory)",
    );
    // Without a loader the same limits hold in the Worker for DOCX; a PDF fails saying why (pdf.js
    // is only in the parser's module, which only a Dynamic Worker runs). The PDF limits are the
    // parser module's own, checked here with its reader.
    await expect(extractText("docx", docxBomb(160 * MiB, 1000))).rejects.toThrow(
      "the DOCX file inflates past 33554432 bytes (word/document.xml)",
    );
    await expect(readDocumentText({ ...env, LOADER: undefined }, "org-a", "pdf", makePdf(["x"]))).rejects.toThrow(
      "PDF files are read in the parser's Dynamic Worker (the LOADER binding",
    );
    await expect(extractText("pdf", pdfWithFlateStream(64 * MiB), pdfToPages)).rejects.toThrow(
      "the PDF file holds a stream that decodes past 16777216 bytes",
    );
  });

  it("answers 502 with the reason when arXiv's PDF is a decompression bomb", async () => {
    const owner = await seedOrg();
    const kb = await createKb(owner.owner.apiKey);
    const auth = { userId: owner.owner.userId, orgId: owner.orgId, role: "owner" as const, via: "api_key" as const };
    const feed = `<feed><entry><title>Bombs</title><summary>Abstract.</summary><author><name>A</name></author></entry></feed>`;
    const net = async (input: Request | string | URL) => {
      const url = String(input instanceof Request ? input.url : input);
      return url.startsWith("https://export.arxiv.org/")
        ? new Response(feed)
        : new Response(pdfWithFlateStream(64 * MiB));
    };
    await expect(
      indexIntoKnowledgeBase(env, auth, kb, { arxiv: "2101.00001", config: {} }, { fetch: net }),
    ).rejects.toMatchObject({
      code: "provider_failed",
      message:
        "arXiv's PDF of 2101.00001 could not be read: the PDF file holds a stream that decodes past 16777216 bytes; Loom decodes at most 16777216 bytes per stream",
    });
    expect((await send(`/v1/knowledge-base/${kb}/documents`, owner.owner.apiKey)).body.documents).toEqual([]);
  });
});
