import { WorkerEntrypoint } from "cloudflare:workers";

/**
 * A fake World Wide Web for the `url_data` tests, bound as WEB_FETCHER: Loom sends it the
 * requests its SSRF guard let through, exactly as it would send them to the internet, and it
 * answers with what tests published (status, headers, body), or 404. Tests publish pages through
 * the second entrypoint (FAKE_WEB). One module-level map for the whole run: each test uses its own
 * host names, so tests never see each other's pages.
 */
interface PublishedPage {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
}

const pages = new Map<string, PublishedPage>();
const requests: string[] = [];

export class FakeWeb extends WorkerEntrypoint {
  override async fetch(request: Request): Promise<Response> {
    requests.push(request.url);
    const page = pages.get(request.url);
    if (!page) return new Response("not found", { status: 404, headers: { "content-type": "text/plain" } });
    return new Response(page.body ?? "", {
      status: page.status ?? 200,
      headers: page.headers ?? { "content-type": "text/html; charset=utf-8" },
    });
  }
}

export class FakeWebControl extends WorkerEntrypoint {
  publish(url: string, page: PublishedPage): void {
    pages.set(url, page);
  }

  /** The URLs requested so far whose host is `host`, in order. */
  requestsTo(host: string): string[] {
    return requests.filter((u) => new URL(u).hostname === host);
  }
}
