import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import type { AuthContext } from "../../src/env";
import { indexIntoKnowledgeBase } from "../../src/features/knowledge-bases/index-request";
import { parseArxivRef, parseWikipediaRef, parseYoutubeRef } from "../../src/features/knowledge-bases/sources";
import { createKb, query, send, type Body } from "./kb-fixtures";
import { makePdf } from "./documents";

/** Recorded responses in each service's real wire format, keyed by URL prefix. */
const WIKIPEDIA_API = JSON.stringify({
  batchcomplete: true,
  query: {
    normalized: [{ fromencoded: false, from: "alan turing", to: "Alan turing" }],
    redirects: [{ from: "Alan turing", to: "Alan Turing" }],
    pages: [
      {
        pageid: 1208,
        ns: 0,
        title: "Alan Turing",
        extract:
          "Alan Mathison Turing was an English mathematician, computer scientist, logician and cryptanalyst.\n\n\n== Early life and education ==\n\n\n=== Family ===\nTuring was born in Maida Vale, London, while his father was on leave from the Indian Civil Service.\n\n\n== Codebreaking ==\nDuring the Second World War, Turing worked at Bletchley Park on breaking the Enigma cipher.",
      },
    ],
  },
});
const WIKIPEDIA_MISSING = JSON.stringify({
  batchcomplete: true,
  query: { pages: [{ ns: 0, title: "Qwxzv Plorf", missing: true }] },
});
const TIMEDTEXT = `<?xml version="1.0" encoding="utf-8" ?><transcript><text start="0.32" dur="3.1">Today we build a birdhouse from cedar boards.</text><text start="3.42" dur="2.9">First, measure and cut the roof panels &amp;amp; the floor.</text><text start="6.5" dur="2.2">Sand every edge so nothing splinters.</text></transcript>`;
const OEMBED = JSON.stringify({
  title: "Building a cedar birdhouse",
  author_name: "Woodshop Weekly",
  type: "video",
  version: "1.0",
  provider_name: "YouTube",
  provider_url: "https://www.youtube.com/",
});
const ARXIV_FEED = `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query?search_query%3D%26id_list%3D2101.00001" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: search_query=&amp;id_list=2101.00001</title>
  <id>http://arxiv.org/api/abc</id>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">1</opensearch:totalResults>
  <entry>
    <id>http://arxiv.org/abs/2101.00001v1</id>
    <updated>2021-01-01T00:00:00Z</updated>
    <published>2020-12-31T18:59:59Z</published>
    <title>Sparse Retrieval with
  Learned Term Weights</title>
    <summary>  We study sparse retrieval where term weights are learned from relevance labels &amp; clicks.
</summary>
    <author><name>Ada Lovelace</name></author>
    <author><name>Charles Babbage</name></author>
    <link href="http://arxiv.org/abs/2101.00001v1" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/2101.00001v1" rel="related" type="application/pdf"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.IR" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
</feed>`;

function recorded(routes: Record<string, () => Response>) {
  const seen: string[] = [];
  const fetch = async (input: Request | string | URL) => {
    const url = String(input instanceof Request ? input.url : input);
    seen.push(url);
    const prefix = Object.keys(routes)
      .sort((a, b) => b.length - a.length)
      .find((p) => url.startsWith(p));
    if (!prefix) return new Response("not recorded", { status: 404 });
    return routes[prefix]();
  };
  return { fetch, seen };
}

async function setup() {
  const org = await seedOrg();
  const kb = await createKb(org.owner.apiKey);
  const auth: AuthContext = { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" };
  return { org, kb, auth, key: org.owner.apiKey };
}

describe("knowledge bases: outside sources (recorded responses)", () => {
  it("indexes an encyclopedia article by title, with its sections as headings", async () => {
    const { kb, auth, key } = await setup();
    const net = recorded({
      "https://en.wikipedia.org/w/api.php": () =>
        new Response(WIKIPEDIA_API, { headers: { "content-type": "application/json" } }),
    });
    const [id] = await indexIntoKnowledgeBase(
      env,
      auth,
      kb,
      { encyclopedia: "alan turing", config: {} },
      { fetch: net.fetch },
    );
    expect(net.seen[0]).toContain("titles=alan+turing");
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(docs[0]).toMatchObject({
      _id: id,
      name: "Alan Turing",
      source: "wikipedia",
      path: "https://en.wikipedia.org/wiki/Alan_Turing",
      status: "ready",
    });
    const q = await query(key, kb, { queries: ["Enigma cipher Bletchley"] });
    expect(q.items[0].metadata).toMatchObject({
      source: "wikipedia",
      section: "Codebreaking",
      url: "https://en.wikipedia.org/wiki/Alan_Turing",
    });
  });

  it("accepts the wikipedia spelling and article URLs in other languages", async () => {
    const { kb, auth } = await setup();
    const net = recorded({ "https://de.wikipedia.org/w/api.php": () => new Response(WIKIPEDIA_API) });
    await indexIntoKnowledgeBase(
      env,
      auth,
      kb,
      { wikipedia: "https://de.wikipedia.org/wiki/Alan_Turing", config: {} },
      { fetch: net.fetch },
    );
    expect(net.seen[0]).toMatch(/^https:\/\/de\.wikipedia\.org\/w\/api\.php\?.*titles=Alan\+Turing/);
    expect(parseWikipediaRef("https://en.m.wikipedia.org/wiki/Cat")).toEqual({ lang: "en", title: "Cat" });
  });

  it("answers 400 for a missing article", async () => {
    const { kb, auth } = await setup();
    const net = recorded({ "https://en.wikipedia.org/": () => new Response(WIKIPEDIA_MISSING) });
    await expect(
      indexIntoKnowledgeBase(env, auth, kb, { encyclopedia: "Qwxzv Plorf", config: {} }, { fetch: net.fetch }),
    ).rejects.toThrow("encyclopedia: no Wikipedia article named 'Qwxzv Plorf'");
  });

  it("indexes a video's transcript with its title", async () => {
    const { kb, auth, key } = await setup();
    const net = recorded({
      "https://www.youtube.com/api/timedtext": () =>
        new Response(TIMEDTEXT, { headers: { "content-type": "text/xml" } }),
      "https://www.youtube.com/oembed": () => new Response(OEMBED, { headers: { "content-type": "application/json" } }),
    });
    await indexIntoKnowledgeBase(
      env,
      auth,
      kb,
      { video: "https://youtu.be/dQw4w9WgXcQ", config: {} },
      { fetch: net.fetch },
    );
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(docs[0]).toMatchObject({
      name: "Building a cedar birdhouse",
      source: "youtube",
      path: "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
      status: "ready",
    });
    const q = await query(key, kb, { queries: ["roof panels floor"] });
    expect(String(q.items[0].text)).toContain("roof panels & the floor");
    expect(q.items[0].metadata).toMatchObject({ video_id: "dQw4w9WgXcQ", author: "Woodshop Weekly" });
  });

  it("answers 400 when a video has no transcript", async () => {
    const { kb, auth } = await setup();
    const net = recorded({ "https://www.youtube.com/api/timedtext": () => new Response("") });
    await expect(
      indexIntoKnowledgeBase(env, auth, kb, { youtube: "dQw4w9WgXcQ", config: {} }, { fetch: net.fetch }),
    ).rejects.toThrow("video: no English transcript is published for YouTube video dQw4w9WgXcQ");
  });

  it("indexes a preprint's title, abstract and PDF text", async () => {
    const { kb, auth, key } = await setup();
    const net = recorded({
      "https://export.arxiv.org/api/query": () =>
        new Response(ARXIV_FEED, { headers: { "content-type": "application/atom+xml" } }),
      "https://arxiv.org/pdf/2101.00001": () =>
        new Response(null, { status: 301, headers: { location: "https://arxiv.org/pdf/2101.00001v1" } }),
      "https://arxiv.org/pdf/2101.00001v1": () =>
        new Response(
          makePdf([
            "Introduction: inverted indexes remain fast.",
            "Results: learned weights beat BM25 on three collections.",
          ]),
          { headers: { "content-type": "application/pdf" } },
        ),
    });
    await indexIntoKnowledgeBase(env, auth, kb, { arxiv: "arXiv:2101.00001", config: {} }, { fetch: net.fetch });
    const docs = (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
    expect(docs[0]).toMatchObject({
      name: "Sparse Retrieval with Learned Term Weights",
      source: "arxiv",
      path: "https://arxiv.org/abs/2101.00001",
      status: "ready",
    });
    const abstract = await query(key, kb, { queries: ["relevance labels clicks"] });
    expect(String(abstract.items[0].text)).toContain("relevance labels & clicks");
    expect(abstract.items[0].metadata).toMatchObject({
      authors: ["Ada Lovelace", "Charles Babbage"],
      arxiv_id: "2101.00001",
    });
    const body = await query(key, kb, {
      queries: ["learned weights beat BM25"],
      config: { retrieval_config: { search_mode: "keyword" } },
    });
    expect(String(body.items[0].text)).toContain("beat BM25");
  });

  it("parses every reference form", () => {
    expect(parseYoutubeRef("https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=10")).toBe("dQw4w9WgXcQ");
    expect(parseYoutubeRef("https://www.youtube.com/shorts/dQw4w9WgXcQ")).toBe("dQw4w9WgXcQ");
    expect(parseArxivRef("https://arxiv.org/abs/2101.00001v2")).toBe("2101.00001v2");
    expect(parseArxivRef("https://arxiv.org/pdf/2101.00001.pdf")).toBe("2101.00001");
    expect(parseArxivRef("hep-th/9901001")).toBe("hep-th/9901001");
    expect(() => parseYoutubeRef("short")).toThrow("video: give a YouTube video id (11 characters) or URL");
  });
});
