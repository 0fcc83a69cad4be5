import { badRequest } from "../../lib/errors";
import type { FetchFunction } from "../../lib/egress";
import { checkPageUrl, fetchPage, fetchRobots, robotsAllows, type RobotsRules, type WebPage } from "./web-pages";

/**
 * Breadth-first crawl of one site for `url_data`, as a state that is advanced a few pages at a
 * time (the knowledge base's index object runs the steps from its alarm, so a crawl never holds a
 * request). The first page must be readable: its failure is the request's error. Later pages that
 * fail, that the guard or robots.txt refuses, or that are not HTML are skipped.
 * "Same site" means the same host name, a leading `www.` ignored, over http or https; links to
 * other hosts are never followed.
 */
export interface CrawlState {
  site: string;
  limit: number;
  /** Pages read so far, the first included. */
  count: number;
  frontier: string[];
  seen: string[];
  /** robots.txt rules per origin, each fetched once per crawl. */
  robots: Record<string, RobotsRules>;
}

/** Pages one alarm step reads (each under the page time and size caps). */
export const PAGES_PER_STEP = 5;

export function siteOf(url: URL): string {
  return url.hostname
    .toLowerCase()
    .replace(/\.$/, "")
    .replace(/^www\./, "");
}

async function allowedByRobots(
  state: Pick<CrawlState, "robots">,
  url: URL,
  fetchImpl?: FetchFunction,
): Promise<boolean> {
  let rules = state.robots[url.origin];
  if (!rules) state.robots[url.origin] = rules = await fetchRobots(url.origin, fetchImpl);
  return robotsAllows(rules, url);
}

/** Reads the first page (refused, robots-disallowed or unreadable: thrown) and starts the crawl state. */
export async function startCrawl(
  startRaw: string,
  limit: number,
  fetchImpl?: FetchFunction,
): Promise<{ page: WebPage; state: CrawlState }> {
  const start = checkPageUrl(startRaw);
  start.hash = "";
  const state: CrawlState = {
    site: siteOf(start),
    limit,
    count: 1,
    frontier: [],
    seen: [start.toString()],
    robots: {},
  };
  if (!(await allowedByRobots(state, start, fetchImpl)))
    throw badRequest(`url_data: robots.txt of ${start.hostname} does not allow fetching ${start.toString()}`);
  const page = await fetchPage(start.toString(), fetchImpl);
  if (!state.seen.includes(page.url)) state.seen.push(page.url);
  enqueue(state, page.links);
  return { page, state };
}

function enqueue(state: CrawlState, links: string[]): void {
  // The frontier never needs more than the pages still to read, with room for skipped ones.
  const maxFrontier = state.limit * 8;
  const seen = new Set(state.seen);
  for (const link of links) {
    if (state.frontier.length >= maxFrontier) return;
    if (seen.has(link) || siteOf(new URL(link)) !== state.site) continue;
    seen.add(link);
    state.seen.push(link);
    state.frontier.push(link);
  }
}

export function crawlFinished(state: CrawlState): boolean {
  return state.count >= state.limit || state.frontier.length === 0;
}

/** Reads up to `maxPages` more pages (fewer when the limit or the frontier ends first); mutates `state`. */
export async function crawlStep(state: CrawlState, maxPages: number, fetchImpl?: FetchFunction): Promise<WebPage[]> {
  const pages: WebPage[] = [];
  let attempts = 0;
  // Skipped pages count as attempts too, so one step stays bounded on a site of broken links.
  while (!crawlFinished(state) && pages.length < maxPages && attempts < maxPages * 4) {
    attempts++;
    const next = state.frontier.shift() as string;
    try {
      const url = checkPageUrl(next);
      if (!(await allowedByRobots(state, url, fetchImpl))) continue;
      const page = await fetchPage(next, fetchImpl);
      // A redirect may land on another site or on a page already read.
      if (siteOf(new URL(page.url)) !== state.site || (page.url !== next && state.seen.includes(page.url))) continue;
      state.seen.push(page.url);
      state.count++;
      pages.push(page);
      enqueue(state, page.links);
    } catch {}
  }
  return pages;
}
