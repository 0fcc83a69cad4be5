import { badRequest, AppError } from "../../lib/errors";
import { guardedFetch, type FetchFunction } from "../../lib/egress";
import { checkUrl } from "../../lib/ssrf-guard";
import { decodeEntities } from "./parsing/markup";
import { ExtractionError } from "./parsing/parse-limits";

/**
 * The outside sources a knowledge base can index: an encyclopedia article (Wikipedia), a video's
 * transcript (YouTube) and a preprint (arXiv: title, abstract and the text of its PDF). Each is
 * fetched from that service's public endpoints only, through the SSRF guard.
 */
export interface SourceDocument {
  source: "wikipedia" | "youtube" | "arxiv";
  name: string;
  url: string;
  mimeType: string;
  pages: string[];
  metadata: Record<string, unknown>;
}

const TIMEOUT_MS = 15_000;
const MAX_JSON_BYTES = 8 * 1024 * 1024;
const MAX_PDF_BYTES = 30 * 1024 * 1024;

export const WIKIPEDIA_HOSTS = ["*.wikipedia.org"] as const;
export const YOUTUBE_HOSTS = ["www.youtube.com", "youtube.com", "m.youtube.com", "youtu.be"] as const;
export const ARXIV_HOSTS = ["arxiv.org", "export.arxiv.org"] as const;

const looksLikeUrl = (ref: string): boolean => /^[a-z][a-z0-9+.-]*:/i.test(ref.trim()) || ref.trim().startsWith("//");

// ---------- Wikipedia ----------

export function parseWikipediaRef(ref: string): { lang: string; title: string } {
  const text = ref.trim();
  if (!looksLikeUrl(text)) {
    if (text.length > 300) throw badRequest("encyclopedia: an article title is at most 300 characters");
    return { lang: "en", title: text };
  }
  const url = checkUrl(text, WIKIPEDIA_HOSTS);
  const lang = url.hostname.split(".")[0].replace(/^(\w+)\.m$/, "$1");
  if (!/^[a-z]{2,3}(-[a-z]{2,10})?$/.test(lang))
    throw badRequest(`encyclopedia: ${url.hostname} is not a language edition of Wikipedia`);
  const match = /^\/wiki\/(.+)$/.exec(url.pathname);
  const title = match ? decodeURIComponent(match[1]).replace(/_/g, " ") : url.searchParams.get("title");
  if (!title)
    throw badRequest("encyclopedia: the URL names no article (expected https://<lang>.wikipedia.org/wiki/<Title>)");
  return { lang, title };
}

/** MediaWiki plain-text extracts mark sections `== Title ==`; they become Markdown headings. */
function wikiSectionsToMarkdown(extract: string): string {
  return extract.replace(
    /^(={2,6})\s*(.+?)\s*\1\s*$/gm,
    (_m, marks: string, title: string) => `${"#".repeat(marks.length)} ${title}`,
  );
}

export async function fetchWikipedia(ref: string, fetchImpl?: FetchFunction): Promise<SourceDocument> {
  const { lang, title } = parseWikipediaRef(ref);
  const api = new URL(`https://${lang}.wikipedia.org/w/api.php`);
  for (const [k, v] of Object.entries({
    action: "query",
    format: "json",
    formatversion: "2",
    prop: "extracts",
    explaintext: "1",
    redirects: "1",
    titles: title,
  }))
    api.searchParams.set(k, v);
  const response = await guardedFetch(api.toString(), {
    allowHosts: WIKIPEDIA_HOSTS,
    maxBytes: MAX_JSON_BYTES,
    timeoutMs: TIMEOUT_MS,
    fetch: fetchImpl,
  });
  if (response.status !== 200) throw new AppError("provider_failed", `Wikipedia answered ${response.status}`);
  let body: {
    query?: { pages?: { title?: string; pageid?: number; extract?: string; missing?: boolean; invalid?: boolean }[] };
  };
  try {
    body = JSON.parse(new TextDecoder().decode(response.body));
  } catch {
    throw new AppError("provider_failed", "Wikipedia answered something that is not JSON");
  }
  const page = body.query?.pages?.[0];
  if (!page || page.missing || page.invalid || !page.extract)
    throw badRequest(`encyclopedia: no Wikipedia article named '${title}'`);
  const articleTitle = page.title ?? title;
  const url = `https://${lang}.wikipedia.org/wiki/${encodeURIComponent(articleTitle.replace(/ /g, "_"))}`;
  return {
    source: "wikipedia",
    name: articleTitle,
    url,
    mimeType: "text/markdown",
    pages: [`# ${articleTitle}\n\n${wikiSectionsToMarkdown(page.extract)}`],
    metadata: { title: articleTitle, url, language: lang },
  };
}

// ---------- YouTube ----------

const VIDEO_ID = /^[A-Za-z0-9_-]{11}$/;

export function parseYoutubeRef(ref: string): string {
  const text = ref.trim();
  if (!looksLikeUrl(text)) {
    if (!VIDEO_ID.test(text)) throw badRequest("video: give a YouTube video id (11 characters) or URL");
    return text;
  }
  const url = checkUrl(text, YOUTUBE_HOSTS);
  const candidates = [
    url.searchParams.get("v"),
    url.hostname === "youtu.be" ? url.pathname.slice(1) : null,
    /^\/(?:shorts|embed|live)\/([^/]+)/.exec(url.pathname)?.[1] ?? null,
  ];
  const id = candidates.find((c): c is string => c !== null && VIDEO_ID.test(c));
  if (!id) throw badRequest("video: the URL names no YouTube video");
  return id;
}

/** The timedtext format: `<transcript><text start=".." dur="..">line</text>...</transcript>`. */
export function parseTimedText(xml: string): { start: number; text: string }[] {
  const lines: { start: number; text: string }[] = [];
  for (const match of xml.matchAll(/<text\b([^>]*)>([\s\S]*?)<\/text>/g)) {
    const start = Number(/start="([\d.]+)"/.exec(match[1])?.[1] ?? "0");
    // Captions are entity-encoded twice (`&amp;#39;`).
    const text = decodeEntities(decodeEntities(match[2]))
      .replace(/<[^>]*>/g, "")
      .replace(/\s+/g, " ")
      .trim();
    if (text) lines.push({ start, text });
  }
  return lines;
}

export async function fetchYoutube(ref: string, fetchImpl?: FetchFunction): Promise<SourceDocument> {
  const id = parseYoutubeRef(ref);
  const watchUrl = `https://www.youtube.com/watch?v=${id}`;
  const options = { allowHosts: YOUTUBE_HOSTS, maxBytes: MAX_JSON_BYTES, timeoutMs: TIMEOUT_MS, fetch: fetchImpl };
  const transcript = await guardedFetch(`https://www.youtube.com/api/timedtext?lang=en&v=${id}`, options);
  const lines = transcript.status === 200 ? parseTimedText(new TextDecoder().decode(transcript.body)) : [];
  if (lines.length === 0) throw badRequest(`video: no English transcript is published for YouTube video ${id}`);
  let title = `YouTube video ${id}`;
  let author: string | undefined;
  const oembed = await guardedFetch(
    `https://www.youtube.com/oembed?format=json&url=${encodeURIComponent(watchUrl)}`,
    options,
  ).catch(() => undefined);
  if (oembed?.status === 200) {
    try {
      const info = JSON.parse(new TextDecoder().decode(oembed.body)) as { title?: string; author_name?: string };
      title = info.title ?? title;
      author = info.author_name;
    } catch {
      // The title is a nicety; the transcript is what gets indexed.
    }
  }
  // Sentences of a transcript rarely end with punctuation: one caption line per line keeps chunks tidy.
  const text = `# ${title}\n\n${lines.map((l) => l.text).join("\n")}`;
  return {
    source: "youtube",
    name: title,
    url: watchUrl,
    mimeType: "text/plain",
    pages: [text],
    metadata: { title, url: watchUrl, video_id: id, ...(author ? { author } : {}) },
  };
}

// ---------- arXiv ----------

const NEW_ID = /^\d{4}\.\d{4,5}(v\d+)?$/;
const OLD_ID = /^[a-z-]+(\.[A-Z]{2})?\/\d{7}(v\d+)?$/;

export function parseArxivRef(ref: string): string {
  const text = ref.trim().replace(/^arxiv:/i, "");
  if (!looksLikeUrl(text)) {
    if (!NEW_ID.test(text) && !OLD_ID.test(text))
      throw badRequest("preprint: give an arXiv id (like 2101.00001) or URL");
    return text;
  }
  const url = checkUrl(text, ARXIV_HOSTS);
  const id = /^\/(?:abs|pdf)\/(.+?)(?:\.pdf)?$/.exec(url.pathname)?.[1];
  if (!id || (!NEW_ID.test(id) && !OLD_ID.test(id))) throw badRequest("preprint: the URL names no arXiv paper");
  return id;
}

function atomField(entry: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}\\b[^>]*>([\\s\\S]*?)</${tag}>`).exec(entry);
  return match ? decodeEntities(match[1]).replace(/\s+/g, " ").trim() : undefined;
}

/** Reads a PDF's pages (under the parser's limits); throws ExtractionError when it cannot. */
export type PdfReader = (bytes: Uint8Array) => Promise<string[]>;

export async function fetchArxiv(
  ref: string,
  fetchImpl: FetchFunction | undefined,
  readPdf: PdfReader,
): Promise<SourceDocument> {
  const id = parseArxivRef(ref);
  const options = { allowHosts: ARXIV_HOSTS, timeoutMs: TIMEOUT_MS, fetch: fetchImpl };
  const feed = await guardedFetch(`https://export.arxiv.org/api/query?id_list=${encodeURIComponent(id)}`, {
    ...options,
    maxBytes: MAX_JSON_BYTES,
  });
  if (feed.status !== 200) throw new AppError("provider_failed", `arXiv answered ${feed.status}`);
  const xml = new TextDecoder().decode(feed.body);
  const entry = /<entry>([\s\S]*?)<\/entry>/.exec(xml)?.[1];
  const title = entry ? atomField(entry, "title") : undefined;
  if (!entry || !title || title === "Error") throw badRequest(`preprint: no arXiv paper with id ${id}`);
  const summary = atomField(entry, "summary") ?? "";
  const authors = [...entry.matchAll(/<author>\s*<name>([^<]*)<\/name>/g)].map((m) => decodeEntities(m[1]).trim());
  const published = atomField(entry, "published");
  const pdf = await guardedFetch(`https://arxiv.org/pdf/${id}`, { ...options, maxBytes: MAX_PDF_BYTES });
  if (pdf.status !== 200) throw new AppError("provider_failed", `arXiv answered ${pdf.status} for the PDF of ${id}`);
  let pages: string[];
  try {
    pages = await readPdf(pdf.body);
  } catch (error) {
    // arXiv's file, not the caller's request, is at fault: a failing outside source.
    if (error instanceof ExtractionError)
      throw new AppError("provider_failed", `arXiv's PDF of ${id} could not be read: ${error.message}`);
    throw error;
  }
  const url = `https://arxiv.org/abs/${id}`;
  const head = `# ${title}\n\n## Abstract\n\n${summary}`;
  return {
    source: "arxiv",
    name: title,
    url,
    mimeType: "application/pdf",
    pages: [head, ...pages],
    metadata: { title, url, arxiv_id: id, authors, ...(published ? { published } : {}) },
  };
}
