import { AppError, badRequest } from "../../lib/errors";
import { guardedFetch, type FetchFunction, type GuardedResponse } from "../../lib/egress";
import { checkUrl, type UrlRules } from "../../lib/ssrf-guard";
import { decodeEntities, htmlToText } from "./parsing/markup";

/**
 * One web page, fetched for a knowledge base through the SSRF guard's web rules (any named public
 * host, http or https, default ports) and read as Markdown. Pure helpers for links, titles and
 * robots.txt live here too, so the crawler (web-crawl.ts) only decides what to fetch next.
 */
export const WEB_RULES: UrlRules = { webHosts: true };
export const PAGE_TIMEOUT_MS = 15_000;
/** Largest page body read; past it the page is refused (413 for the first page, skipped in a crawl). */
export const MAX_PAGE_BYTES = 5 * 1024 * 1024;
const MAX_ROBOTS_BYTES = 512 * 1024;
const HTML_TYPES = ["text/html", "application/xhtml+xml"];
/** Links read from one page; a page listing more adds only its first ones to the crawl. */
const MAX_LINKS_PER_PAGE = 1000;
/** Longer links are not followed (they are rarely pages, and a crawl's state keeps every URL it saw). */
const MAX_LINK_CHARS = 500;

export interface WebPage {
  url: string;
  title: string;
  markdown: string;
  links: string[];
}

/** Checks a page URL as the crawler will fetch it; a refused one is a 400 `refused to fetch: ...`. */
export function checkPageUrl(raw: string): URL {
  return checkUrl(raw, WEB_RULES);
}

export async function fetchPage(raw: string, fetchImpl?: FetchFunction): Promise<WebPage> {
  const response = await guardedFetch(raw, {
    rules: WEB_RULES,
    maxBytes: MAX_PAGE_BYTES,
    timeoutMs: PAGE_TIMEOUT_MS,
    fetch: fetchImpl,
    headers: { accept: "text/html,application/xhtml+xml;q=0.9" },
  });
  const host = new URL(response.url).hostname;
  // A failing server is an outside failure (502); any other answer but 200 is the caller's URL (400).
  if (response.status >= 500)
    throw new AppError("provider_failed", `url_data: ${host} answered ${response.status} for ${response.url}`);
  if (response.status !== 200) throw badRequest(`url_data: ${host} answered ${response.status} for ${response.url}`);
  return readPage(response);
}

export function readPage(response: GuardedResponse & { url: string }): WebPage {
  const type = response.contentType.split(";")[0].trim().toLowerCase();
  if (!HTML_TYPES.includes(type))
    throw badRequest(`url_data: ${response.url} is not an HTML page (content type ${type || "none"})`);
  const html = new TextDecoder().decode(response.body);
  const title = pageTitle(html);
  const text = htmlToText(html);
  // A page whose body repeats its title as a heading keeps one; otherwise the title heads it.
  const markdown = title && !text.startsWith("# ") ? `# ${title}\n\n${text}` : text;
  return { url: response.url, title: title || response.url, markdown, links: pageLinks(html, response.url) };
}

export function pageTitle(html: string): string {
  // The attribute run is bounded so a page of unclosed `<title` tags costs little.
  const open = /<title\b[^>]{0,1024}>/i.exec(html.slice(0, 64 * 1024));
  if (!open) return "";
  const start = open.index + open[0].length;
  // Searched in the page itself (a lower-cased copy may differ in length, and its indexes with it).
  const close = /<\/title/gi;
  close.lastIndex = start;
  const end = close.exec(html)?.index ?? start + 300;
  return decodeEntities(html.slice(start, Math.min(end, start + 4096)))
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 300);
}

/**
 * Absolute http(s) links of `<a href>` tags, fragments dropped, in page order, without repeats.
 * One pass: each `<a` is read up to its `>`, and a page with an unclosed tag ends the scan.
 */
export function pageLinks(html: string, base: string): string[] {
  const found = new Set<string>();
  let at = 0;
  while (found.size < MAX_LINKS_PER_PAGE) {
    const lt = html.indexOf("<", at);
    if (lt < 0) break;
    at = lt + 1;
    if ((html[lt + 1] !== "a" && html[lt + 1] !== "A") || !/\s/.test(html[lt + 2] ?? "")) continue;
    const gt = html.indexOf(">", lt + 2);
    if (gt < 0) break;
    at = gt + 1;
    const href = /\shref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/i.exec(html.slice(lt, gt));
    const value = href ? decodeEntities(href[1] ?? href[2] ?? href[3] ?? "").trim() : "";
    if (!value) continue;
    try {
      const url = new URL(value, base);
      if (url.protocol !== "http:" && url.protocol !== "https:") continue;
      url.hash = "";
      if (url.toString().length <= MAX_LINK_CHARS) found.add(url.toString());
    } catch {
      // A link that does not parse leads nowhere.
    }
  }
  return [...found];
}

/** A host's robots.txt rules for Loom: the group naming `loom` if any, else the `*` group. */
export interface RobotsRules {
  allow: string[];
  disallow: string[];
}

export function parseRobots(text: string): RobotsRules {
  const groups: { agents: string[]; allow: string[]; disallow: string[] }[] = [];
  let current: (typeof groups)[number] | undefined;
  let lastWasAgent = false;
  for (const rawLine of text.split(/\r?\n/).slice(0, 5000)) {
    const line = rawLine.replace(/#.*$/, "").trim();
    const match = /^([a-z-]+)\s*:\s*(.*)$/i.exec(line);
    if (!match) continue;
    const field = match[1].toLowerCase();
    const value = match[2].trim();
    if (field === "user-agent") {
      if (!current || !lastWasAgent) groups.push((current = { agents: [], allow: [], disallow: [] }));
      current.agents.push(value.toLowerCase());
      lastWasAgent = true;
      continue;
    }
    lastWasAgent = false;
    if (!current || !value) continue;
    if (field === "disallow") current.disallow.push(value);
    else if (field === "allow") current.allow.push(value);
  }
  const mine = groups.filter((g) => g.agents.some((a) => a.replace(/\/.*$/, "") === "loom"));
  const chosen = mine.length > 0 ? mine : groups.filter((g) => g.agents.includes("*"));
  return { allow: chosen.flatMap((g) => g.allow), disallow: chosen.flatMap((g) => g.disallow) };
}

/** Whether a robots.txt path pattern (`*` any run, `$` end) matches the start of `path`. */
function robotsMatch(pattern: string, path: string): boolean {
  const anchored = pattern.endsWith("$");
  const parts = (anchored ? pattern.slice(0, -1) : pattern).split("*");
  if (!path.startsWith(parts[0])) return false;
  let at = parts[0].length;
  for (const part of parts.slice(1)) {
    const found = path.indexOf(part, at);
    if (found < 0) return false;
    at = found + part.length;
  }
  // Anchored: the last literal part must end the path (it was matched at or before the end).
  return !anchored || (parts.length === 1 ? path === parts[0] : path.endsWith(parts[parts.length - 1]));
}

/** The longest matching rule wins, Allow on a tie (RFC 9309). */
export function robotsAllows(rules: RobotsRules, url: URL): boolean {
  const path = `${url.pathname}${url.search}`;
  const longest = (patterns: string[]): number =>
    Math.max(-1, ...patterns.filter((p) => robotsMatch(p, path)).map((p) => p.length));
  const disallowed = longest(rules.disallow);
  return disallowed < 0 || longest(rules.allow) >= disallowed;
}

/**
 * A host's rules, fetched through the same guard. No robots.txt (any 4xx) allows everything; a
 * server error or an unreachable file disallows everything, as RFC 9309 asks.
 */
export async function fetchRobots(origin: string, fetchImpl?: FetchFunction): Promise<RobotsRules> {
  try {
    const response = await guardedFetch(`${origin}/robots.txt`, {
      rules: WEB_RULES,
      maxBytes: MAX_ROBOTS_BYTES,
      timeoutMs: PAGE_TIMEOUT_MS,
      fetch: fetchImpl,
    });
    if (response.status >= 400 && response.status < 500) return { allow: [], disallow: [] };
    if (response.status !== 200) return { allow: [], disallow: ["/"] };
    return parseRobots(new TextDecoder().decode(response.body));
  } catch {
    return { allow: [], disallow: ["/"] };
  }
}
