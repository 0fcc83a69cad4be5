import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { checkUrl } from "../../src/lib/ssrf-guard";
import { createKb } from "./kb-fixtures";
import { documents, freshSite, html, indexObject, indexUrl, publish, runAlarms, sdkUrlBody } from "./web-fixtures";

async function setup() {
  const org = await seedOrg();
  const key = org.owner.apiKey;
  return { key, kb: await createKb(key), site: freshSite() };
}

const refused = (reason: string) => ({ status: 400, body: { status: "failed", error: `refused to fetch: ${reason}` } });
const IP_ONLY = "IP addresses are not allowed, only named hosts";

describe("url_data: the SSRF guard on the real fetch path", () => {
  it("refuses IP literals in every spelling, local names, odd ports and credentials before anything is sent", async () => {
    const { key, kb } = await setup();
    const cases: [string, string][] = [
      ["http://127.0.0.1/", IP_ONLY],
      ["http://2130706433/", IP_ONLY],
      ["http://0x7f.1/", IP_ONLY],
      ["http://0177.0.0.1/", IP_ONLY],
      ["http://127.1/", IP_ONLY],
      ["http://[::1]/", IP_ONLY],
      ["http://[::ffff:169.254.169.254]/", IP_ONLY],
      ["http://169.254.169.254/latest/meta-data/", IP_ONLY],
      ["http://10.0.0.5/", IP_ONLY],
      ["http://%31%32%37.0.0.1/", IP_ONLY],
      ["http://localhost/", "host localhost is a local or private name"],
      ["http://metadata.google.internal/", "host metadata.google.internal is a local or private name"],
      ["http://intranet/", "host intranet is a local or private name"],
      ["http://127.0.0.1.nip.io/", "host 127.0.0.1.nip.io is a local or private name"],
      ["https://example.com:8443/", "only the default port of http or https is allowed"],
      ["http://example.com:6379/", "only the default port of http or https is allowed"],
      ["http://user:pw@example.com/", "URLs with credentials are not allowed"],
      ["file:///etc/passwd", "only http and https URLs are allowed"],
    ];
    for (const [url, reason] of cases) expect(await indexUrl(key, kb, sdkUrlBody(url)), url).toEqual(refused(reason));
    for (const host of ["127.0.0.1", "169.254.169.254", "10.0.0.5", "localhost", "metadata.google.internal", "[::1]"])
      expect(await env.FAKE_WEB.requestsTo(host)).toEqual([]);
    expect(await documents(key, kb)).toEqual([]);
  });

  it("re-checks redirects: a public page redirecting to the metadata address or localhost is refused, and those are never fetched", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/go`, "", {
      status: 302,
      headers: { location: "http://169.254.169.254/latest/meta-data/" },
    });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/go`))).toEqual(refused(IP_ONLY));
    await publish(`https://${site}/local`, "", { status: 301, headers: { location: "http://localhost/admin" } });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/local`))).toEqual(
      refused("host localhost is a local or private name"),
    );
    expect(await env.FAKE_WEB.requestsTo("169.254.169.254")).toEqual([]);
    expect(await env.FAKE_WEB.requestsTo("localhost")).toEqual([]);
    expect(await documents(key, kb)).toEqual([]);
  });

  it("a crawl skips same-site links that redirect to a private address or use another port", async () => {
    const { key, kb, site } = await setup();
    await publish(
      `https://${site}/`,
      html(
        "Home",
        `<p>Start.</p><a href="/hop">hop</a> <a href="https://${site}:8443/admin">admin</a> <a href="/ok">ok</a>`,
      ),
    );
    await publish(`https://${site}/hop`, "", { status: 307, headers: { location: "http://10.0.0.5/internal" } });
    await publish(`https://${site}:8443/admin`, html("Admin", "<p>Internal.</p>"));
    await publish(`https://${site}/ok`, html("Ok", "<p>Public page.</p>"));
    expect((await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { url_limit: 10 }))).status).toBe(200);
    await runAlarms(kb);
    expect((await documents(key, kb)).map((d) => d.name).sort()).toEqual(["Home", "Ok"]);
    expect(await env.FAKE_WEB.requestsTo("10.0.0.5")).toEqual([]);
    expect(await env.FAKE_WEB.requestsTo(site)).not.toContain(`https://${site}:8443/admin`);
  });

  it("the web rules allow http and https on named public hosts only", () => {
    expect(checkUrl("http://example.com/page", { webHosts: true }).toString()).toBe("http://example.com/page");
    expect(checkUrl("https://docs.example.org/a?b=1", { webHosts: true }).hostname).toBe("docs.example.org");
    expect(() => checkUrl("https://example.com:444/", { webHosts: true })).toThrow(
      "only the default port of http or https is allowed",
    );
    expect(() => checkUrl("https://[fd00::1]/", { webHosts: true })).toThrow(IP_ONLY);
    // The fixed services keep their own, narrower rules.
    expect(() => checkUrl("http://en.wikipedia.org/", ["*.wikipedia.org"])).toThrow("only https URLs are allowed");
  });

  it("one knowledge base keeps at most 100 crawled or re-scraped web sources, so it cannot become a periodic fetcher of any size", async () => {
    const { key, kb, site } = await setup();
    await publish(`https://${site}/`, html("Home", "<p>Hi.</p>"));
    await runInDurableObject(indexObject(kb), (_object, state) => {
      for (let i = 0; i < 100; i++)
        state.storage.sql.exec(
          "INSERT INTO web_sources (id, record, crawling, next_at) VALUES (?, '{}', 0, NULL)",
          `held-${i}`,
        );
    });
    const error =
      "url_data: this knowledge base already keeps 100 web sources that are crawled or re-scraped (the limit); index into another knowledge base, or send recursive false with rescrape_frequency Never";
    expect(
      await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { recursive: false, rescrape_frequency: "Daily" })),
    ).toEqual({ status: 400, body: { status: "failed", error } });
    expect(await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { url_limit: 5 }))).toEqual({
      status: 400,
      body: { status: "failed", error },
    });
    expect(await env.FAKE_WEB.requestsTo(site)).toEqual([]);
    // A single page read once is not a source and stays allowed.
    expect((await indexUrl(key, kb, sdkUrlBody(`https://${site}/`, { recursive: false }))).status).toBe(200);
  });

  it("another organization's knowledge base is a 404, and nothing is fetched for it", async () => {
    const { kb, site } = await setup();
    const stranger = (await seedOrg()).owner.apiKey;
    await publish(`https://${site}/`, html("Home", "<p>Hi.</p>"));
    const res = await indexUrl(stranger, kb, sdkUrlBody(`https://${site}/`));
    expect(res.status).toBe(404);
    expect(await env.FAKE_WEB.requestsTo(site)).toEqual([]);
  });
});
