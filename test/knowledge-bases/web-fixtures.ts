import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { post, send, type Body } from "./kb-fixtures";
import type { WebSourceRecord } from "../../src/features/knowledge-bases/web-ingestion";
import { WebSources } from "../../src/features/knowledge-bases/web-sources";

/** A host of its own for each test, so the shared fake web never mixes tests' pages. */
export function freshSite(): string {
  return `site-${crypto.randomUUID().slice(0, 8)}.example.com`;
}

export function html(title: string, body: string): string {
  return `<!doctype html><html><head><title>${title}</title><script>var tracking = "do not index";</script></head><body>${body}</body></html>`;
}

export async function publish(
  url: string,
  body: string,
  init: { status?: number; headers?: Record<string, string> } = {},
): Promise<void> {
  await env.FAKE_WEB.publish(url, {
    body,
    status: init.status ?? 200,
    headers: init.headers ?? { "content-type": "text/html; charset=utf-8" },
  });
}

/** What the hosted SDK sends for `index_document("url", url, url_data_config=...)` (unset options left out). */
export function sdkUrlBody(
  url: string,
  options: {
    recursive?: boolean;
    return_type?: string;
    url_limit?: number;
    rescrape_frequency?: string;
    apify_key?: string;
  } = {},
): Body {
  const request: Body = { url, recursive: options.recursive ?? true, return_type: options.return_type ?? "CHUNKS" };
  if (options.url_limit !== undefined) request.url_limit = options.url_limit;
  if (options.apify_key !== undefined) request.apify_key = options.apify_key;
  return {
    url_data: { request, rescrape_frequency: options.rescrape_frequency ?? "Never" },
    config: {
      index_tables: false,
      analyze_documents: false,
      enrichment_tasks: null,
      file_processing_implementation: "Default",
      chunk_size: null,
      chunk_overlap: null,
      apify_key: null,
    },
  };
}

export const indexUrl = (key: string, kb: string, body: Body) => post(`/v1/knowledge-base/${kb}/index`, key, body);

export function indexObject(kb: string) {
  return env.KB_INDEX.get(env.KB_INDEX.idFromName(kb));
}

/** Fires the knowledge base's alarm until nothing is left to do now (a crawl's steps), at most `max` times. */
export async function runAlarms(kb: string, max = 30): Promise<number> {
  let runs = 0;
  while (runs < max && (await runDurableObjectAlarm(indexObject(kb)))) {
    runs++;
    // A rescrape's alarm (hours ahead) is not work to do now.
    const alarm = await scheduledAlarm(kb);
    if (alarm === null || alarm > Date.now() + 60_000) break;
  }
  return runs;
}

export async function documents(key: string, kb: string): Promise<Body[]> {
  return (await send(`/v1/knowledge-base/${kb}/documents`, key)).body.documents as Body[];
}

export function scheduledAlarm(kb: string): Promise<number | null> {
  return runInDurableObject(indexObject(kb), (_object, state) => state.storage.getAlarm());
}

/** Makes every rescrape of the knowledge base due now, as the passing of its period would. */
export function makeRescrapesDue(kb: string): Promise<void> {
  return runInDurableObject(indexObject(kb), (_object, state) => {
    state.storage.sql.exec("UPDATE web_sources SET next_at = 0 WHERE next_at IS NOT NULL");
  });
}

/** The index object's alarm and the stored due times of its re-scraped sources, read together. */
export function rescrapeSchedule(kb: string): Promise<{ alarm: number | null; due: number[] }> {
  return runInDurableObject(indexObject(kb), async (_object, state) => ({
    alarm: await state.storage.getAlarm(),
    due: state.storage.sql
      .exec<{ at: number }>("SELECT next_at AS at FROM web_sources WHERE next_at IS NOT NULL")
      .toArray()
      .map((r) => r.at),
  }));
}

/**
 * When the web-source store schedules the next rescrape of the knowledge base's one stored source
 * if its clock reads `now`: the source is saved again under a probe id with that clock, read back
 * and removed, so the schedule is checked without reading the wall clock.
 */
export function nextRescrapeAt(kb: string, now: number): Promise<number | null> {
  return runInDurableObject(indexObject(kb), (_object, state) => {
    const sql = state.storage.sql;
    const [row] = sql.exec<{ record: string }>("SELECT record FROM web_sources").toArray();
    const probe: WebSourceRecord = {
      ...(JSON.parse(row.record) as WebSourceRecord),
      id: `probe-${crypto.randomUUID()}`,
    };
    const unused = () => Promise.reject(new Error("the probe only saves its schedule"));
    new WebSources(sql, env, { ingest: unused, deleteDocuments: unused }).register(probe, [], now);
    const at = sql.exec<{ at: number | null }>("SELECT next_at AS at FROM web_sources WHERE id = ?", probe.id).one().at;
    sql.exec("DELETE FROM web_sources WHERE id = ?", probe.id);
    return at;
  });
}
