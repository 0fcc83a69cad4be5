import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, query, send } from "./kb-fixtures";
import { pageLinks, pageTitle, parseRobots, robotsAllows } from "../../src/features/knowledge-bases/web-pages";
import {
  documents,
  freshSite,
  html,
  indexUrl,
  makeRescrapesDue,
  nextRescrapeAt,
  publish,
  rescrapeSchedule,
  runAlarms,
  scheduledAlarm,
  sdkUrlBody,
} from "./web-fixtures";

const DAY_MS = 86_400_000;

async function setup() {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  return { key, kb: await createKb(key), site: freshSite() };
}

describe("url_data: web pages (served by the fake web through the real guard)", () => {
  it("indexes one page as Markdown: title, headings, entities decoded, scripts dropped; apify_key is not kept", async () => {
    const { key, kb, site } = await setup();
    await publish(
      `https://${site}/guide`,
      html(
        "Tide pools &amp; you",
        "<h1>Tide pools</h1><p>Anemones &amp; sea stars live in tide pools &mdash; caf&#233; &#x2014; done.</p><h2>Visiting</h2><p>Go at low tide.</p>",
      ),
    );
    const res = await indexUrl(
      key,
      kb,
      sdkUrlBody(`https://${site}/guide`, { recursive: false, apify_key: "apify_api_secret123" }),
    );
    expect(res.status).toBe(200);
    const ids = res.body.document_ids as string[];
    expect(ids).toHaveLength(1);
    const docs = await documents(key, kb);
    expect(docs[0]).toMatchObject({
      _id: ids[0],
      name: "Tide pools & you",
      source: "url",
      path: `https://${site}/guide`,
      mimeType: "text/markdown",
      status: "ready",
    });
    expect(JSON.stringify(docs)).not.toContain("apify_api_secret123");
    const q = await query(key, kb, { queries: ["anemones sea stars"] });
    expect(String(q.items[0].text)).toContain("Anemones & sea stars live in tide pools — café — done.");
    expect(String(q.items[0].text)).not.toContain("tracking");
    expect(q.items[0].metadata).toMatchObject({
      source: "url",
      url: `https://${site}/guide`,
      title: "Tide pools & you",
    });
    const visiting = await query(key, kb, { queries: ["low tide"] });
    expect(visiting.items[0].metadata).toMatchObject({ section: "Visiting" });
    // Not recursive, no rescrape: nothing is left for the alarm.
    expect(await scheduledAlarm(kb)).toBeNull();
  });

  it("crawls same-site links breadth-first in alarm steps up to url_limit, never another host", async () => {
    const { key, kb, site } = await setup();
    const other = freshSite();
    const links = ["/a", "/b", "/c", "/d", "/e", "/f", "/g", `https://${other}/x`, "mailto:me@example.com"]
      .map((h) => `<a href="${h}">${h}</a>`)
      .join(" ");
    await publish(`https://${site}/`, html("Home", `<p>Welcome to the garden site.</p>${links}`));
    for (const p of ["a", "b", "c", "d", "e", "f", "g"])
      await publish(`https://${site}/${p}`, html(`Page ${p}`, `<p>Plant number ${p} grows in the garden.</p>`));
    await publish(`https://${other}/x`, html("Other", "<p>Elsewhere.</p>"));

    const res = await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { url_limit: 7 }));
    expect(res.status).toBe(200);
    expect(res.body.document_ids as string[]).toHaveLength(1);
    // The request indexed the first page; the rest come from the index object's alarm, in steps.
    expect(await documents(key, kb)).toHaveLength(1);
    expect(await runAlarms(kb)).toBeGreaterThan(1);
    const docs = await documents(key, kb);
    expect(docs.map((d) => d.name).sort()).toEqual([
      "Home",
      "Page a",
      "Page b",
      "Page c",
      "Page d",
      "Page e",
      "Page f",
    ]);
    expect(docs.every((d) => d.status === "ready")).toBe(true);
    expect(await env.FAKE_WEB.requestsTo(other)).toEqual([]);
    expect(await env.FAKE_WEB.requestsTo(site)).not.toContain(`https://${site}/g`);
  });

  it("honours robots.txt: Disallow for * skips pages, and Loom's own group can refuse the first page", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/robots.txt`, "User-agent: *\nDisallow: /private\n", {
      headers: { "content-type": "text/plain" },
    });
    await publish(
      `https://${site}/`,
      html("Home", `<p>Index page.</p><a href="/private/notes">secret</a> <a href="/public">public</a>`),
    );
    await publish(`https://${site}/private/notes`, html("Private", "<p>Do not crawl.</p>"));
    await publish(`https://${site}/public`, html("Public", "<p>Fine to crawl.</p>"));
    expect((await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { url_limit: 10 }))).status).toBe(200);
    await runAlarms(kb);
    expect((await documents(key, kb)).map((d) => d.name).sort()).toEqual(["Home", "Public"]);
    expect(await env.FAKE_WEB.requestsTo(site)).not.toContain(`https://${site}/private/notes`);

    const strict = freshSite();
    await publish(`https://${strict}/robots.txt`, "User-agent: *\nAllow: /\n\nUser-agent: Loom\nDisallow: /\n", {
      headers: { "content-type": "text/plain" },
    });
    await publish(`https://${strict}/`, html("Home", "<p>Hi.</p>"));
    const refused = await indexUrl(key, kb, sdkUrlBody(`https://${strict}/`, { recursive: false }));
    expect(refused).toEqual({
      status: 400,
      body: { status: "failed", error: `url_data: robots.txt of ${strict} does not allow fetching https://${strict}/` },
    });
  });

  it("return_type CONTENT gives one document, indexing until the crawl ends, with a page per web page", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/`, html("Manual", `<p>Chapter one covers bicycles.</p><a href="/two">next</a>`));
    await publish(`https://${site}/two`, html("Two", "<p>Chapter two covers tandem riding.</p>"));
    const res = await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { return_type: "CONTENT", url_limit: 5 }));
    const [id] = res.body.document_ids as string[];
    expect((await documents(key, kb))[0]).toMatchObject({ _id: id, status: "indexing", name: "Manual" });
    await runAlarms(kb);
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ _id: id, status: "ready" });
    const q = await query(key, kb, { queries: ["tandem riding"] });
    expect(q.items[0].metadata).toMatchObject({ document_id: id, page: 2 });
  });

  it("a CONTENT document deleted while its crawl runs is not filled: no chunks are left without a document", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/`, html("Manual", `<p>Chapter one covers unicycles.</p><a href="/two">next</a>`));
    await publish(`https://${site}/two`, html("Two", "<p>Chapter two covers juggling.</p>"));
    const [id] = (await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { return_type: "CONTENT" }))).body
      .document_ids as string[];
    expect(
      (await send(`/v1/knowledge-base/${kb}/documents?document_ids=${id}`, key, { method: "DELETE" })).status,
    ).toBe(200);
    await runAlarms(kb);
    expect(await documents(key, kb)).toEqual([]);
    expect((await query(key, kb, { queries: ["juggling unicycles"] })).items).toEqual([]);
  });

  it("rescrape_frequency Daily: the alarm is set a day ahead, and when it fires a changed page replaces its document", async () => {
    const { key, kb, site } = await setup();
    const url = `https://${site}/news`;
    await publish(url, html("News", "<p>The harbour opens on Monday.</p>"));
    const res = await indexUrl(key, kb, sdkUrlBody(url, { recursive: false, rescrape_frequency: "Daily" }));
    const [oldId] = res.body.document_ids as string[];
    // The alarm is the stored due time of the one source, and that due time is the store's clock
    // plus a day: checked with a clock the test sets, so no assertion reads the wall clock.
    const { alarm, due } = await rescrapeSchedule(kb);
    expect(due).toHaveLength(1);
    expect(alarm).toBe(due[0]);
    expect(await nextRescrapeAt(kb, 1_000_000)).toBe(1_000_000 + DAY_MS);

    // Unchanged page: the rescrape keeps the same document.
    await makeRescrapesDue(kb);
    await runAlarms(kb);
    expect((await documents(key, kb)).map((d) => d._id)).toEqual([oldId]);

    await publish(url, html("News", "<p>The harbour now opens on Friday.</p>"));
    await makeRescrapesDue(kb);
    await runAlarms(kb);
    const docs = await documents(key, kb);
    expect(docs).toHaveLength(1);
    expect(docs[0]._id).not.toBe(oldId);
    expect(docs[0]).toMatchObject({ status: "ready", path: url });
    const q = await query(key, kb, { queries: ["harbour opens"] });
    expect(q.items.map((i) => String(i.text)).join(" ")).toContain("Friday");
    expect(q.items.map((i) => String(i.text)).join(" ")).not.toContain("Monday");
    // And the next rescrape is scheduled again.
    expect(await scheduledAlarm(kb)).not.toBeNull();
  });
});

describe("url_data: errors", () => {
  it("answers 400 for a URL that is not one, a scheme other than http(s), an unknown frequency and url_limit past 100", async () => {
    const { key, kb } = await setup();
    expect(await indexUrl(key, kb, sdkUrlBody("not a url"))).toEqual({
      status: 400,
      body: { status: "failed", error: "refused to fetch: not a valid URL" },
    });
    expect(await indexUrl(key, kb, sdkUrlBody("ftp://files.example.com/x"))).toEqual({
      status: 400,
      body: { status: "failed", error: "refused to fetch: only http and https URLs are allowed" },
    });
    const hourly = await indexUrl(key, kb, sdkUrlBody("https://example.com/", { rescrape_frequency: "Hourly" }));
    expect(hourly.status).toBe(400);
    expect(String(hourly.body.error)).toContain("url_data.rescrape_frequency");
    const many = await indexUrl(key, kb, sdkUrlBody("https://example.com/", { url_limit: 101 }));
    expect(many.status).toBe(400);
    expect(String(many.body.error)).toContain("url_data.request.url_limit");
    expect(await documents(key, kb)).toEqual([]);
  });

  it("answers 400 for a page that is not HTML or is missing, 502 for a failing server and 413 for a page past 5 MiB", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/file.pdf`, "%PDF-1.4", { headers: { "content-type": "application/pdf" } });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/file.pdf`))).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: `url_data: https://${site}/file.pdf is not an HTML page (content type application/pdf)`,
      },
    });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/missing`))).toEqual({
      status: 400,
      body: { status: "failed", error: `url_data: ${site} answered 404 for https://${site}/missing` },
    });
    await publish(`https://${site}/down`, "oops", { status: 503, headers: { "content-type": "text/html" } });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/down`))).toEqual({
      status: 502,
      body: { status: "failed", error: `url_data: ${site} answered 503 for https://${site}/down` },
    });
    await publish(`https://${site}/huge`, `<html><body>${"x".repeat(5 * 1024 * 1024 + 1)}</body></html>`);
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/huge`))).toEqual({
      status: 413,
      body: { status: "failed", error: "the fetched resource exceeds 5242880 bytes" },
    });
    expect(await documents(key, kb)).toEqual([]);
  });
});

describe("url_data: page reading and robots.txt rules (pure)", () => {
  it("reads links in one pass: any case, relative, entities, fragments dropped, only http(s)", () => {
    const page = `<p>İstanbul</p><A HREF="/b?x=1&amp;y=2#top">b</A><a class=x href='c'>c</a><a href=javascript:alert(1)>j</a><abbr href="/no">n</abbr><a href="mailto:a@b.c">m</a><a href="/b?x=1&y=2">dup</a><a href="/unclosed"`;
    expect(pageLinks(page, "https://example.com/dir/page")).toEqual([
      "https://example.com/b?x=1&y=2",
      "https://example.com/dir/c",
    ]);
    expect(pageLinks("<a ".repeat(100_000), "https://example.com/")).toEqual([]);
    expect(pageTitle("<html><head><title>İ &amp; Ö</title></head>")).toBe("İ & Ö");
  });

  it("applies Loom's group over *, longest match wins, Allow on a tie, * and $ patterns", () => {
    const rules = parseRobots(
      "User-agent: *\nDisallow: /\n\nUser-agent: Googlebot\nUser-agent: Loom\nDisallow: /private\nAllow: /private/open\nDisallow: /*.pdf$\n",
    );
    const allows = (path: string) => robotsAllows(rules, new URL(`https://example.com${path}`));
    expect(allows("/docs")).toBe(true);
    expect(allows("/private/x")).toBe(false);
    expect(allows("/private/open/x")).toBe(true);
    expect(allows("/files/a.pdf")).toBe(false);
    expect(allows("/files/a.pdf?v=2")).toBe(true);
    expect(robotsAllows(parseRobots("User-agent: *\nDisallow: /tmp\n"), new URL("https://example.com/tmp/a"))).toBe(
      false,
    );
    expect(robotsAllows(parseRobots("User-agent: other\nDisallow: /\n"), new URL("https://example.com/a"))).toBe(true);
  });
});
