import { unzipSync } from "fflate";
import { badRequest } from "../../lib/errors";

/**
 * Text extraction for the file types Loom reads. `detectFileType` decides (and refuses unknown
 * types with a 400 naming them) before anything is stored; `extractText` may then fail on a
 * corrupt file, which fails only that document.
 */
export type FileKind = "text" | "markdown" | "html" | "csv" | "json" | "pdf" | "docx";

export interface ExtractedText {
  /** One entry per page for paged formats (PDF), else one entry. */
  pages: string[];
}

export class ExtractionError extends Error {}

const BY_MIME: Record<string, FileKind> = {
  "text/plain": "text",
  "text/markdown": "markdown",
  "text/x-markdown": "markdown",
  "text/html": "html",
  "application/xhtml+xml": "html",
  "text/csv": "csv",
  "application/csv": "csv",
  "application/json": "json",
  "application/pdf": "pdf",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
};

const BY_EXTENSION: Record<string, FileKind> = {
  txt: "text",
  text: "text",
  log: "text",
  md: "markdown",
  markdown: "markdown",
  html: "html",
  htm: "html",
  csv: "csv",
  json: "json",
  pdf: "pdf",
  docx: "docx",
};

/** Canonical mime type of each kind, recorded on the document. */
export const KIND_MIME: Record<FileKind, string> = {
  text: "text/plain",
  markdown: "text/markdown",
  html: "text/html",
  csv: "text/csv",
  json: "application/json",
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
};

const GENERIC_MIME = new Set(["", "application/octet-stream", "binary/octet-stream"]);

export function detectFileType(mimeType: string | undefined, name: string | undefined, bytes: Uint8Array): FileKind {
  const mime = (mimeType ?? "").split(";")[0].trim().toLowerCase();
  const byMime = BY_MIME[mime];
  if (byMime) return byMime;
  const extension = (name ?? "").toLowerCase().match(/\.([a-z0-9]{1,10})$/)?.[1];
  const byName = extension ? BY_EXTENSION[extension] : undefined;
  if (GENERIC_MIME.has(mime) || mime.startsWith("text/")) {
    if (byName) return byName;
    if (bytes[0] === 0x25 && bytes[1] === 0x50 && bytes[2] === 0x44 && bytes[3] === 0x46) return "pdf";
    if (mime.startsWith("text/")) return "text";
  }
  const named = mime && !GENERIC_MIME.has(mime) ? mime : extension ? `.${extension}` : "unknown";
  throw badRequest(`unsupported file type: ${named} (Loom reads plain text, Markdown, HTML, CSV, JSON, PDF and DOCX)`);
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ExtractionError("the file is not valid UTF-8 text");
  }
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|[a-z]{2,8});/gi, (whole, name: string) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/** Visible text of an HTML page: scripts and styles dropped, block elements become line breaks. */
export function htmlToText(html: string): string {
  const withoutHidden = html.replace(/<(script|style|noscript|template)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, " ").replace(/<!--[\s\S]*?-->/g, " ");
  const headings = withoutHidden.replace(/<h([1-6])\b[^>]*>/gi, (_m, level: string) => `\n\n${"#".repeat(Number(level))} `).replace(/<\/h[1-6]\s*>/gi, "\n\n");
  const blocks = headings.replace(/<\/?(p|div|br|li|tr|section|article|header|footer|ul|ol|table|blockquote|pre)\b[^>]*>/gi, "\n");
  const text = decodeEntities(blocks.replace(/<[^>]*>/g, " "));
  return text
    .split("\n")
    .map((line) => line.replace(/[ \t\f\v]+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** Splits CSV text into rows of fields (RFC 4180 quoting). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"' && field === "") quoted = true;
    else if (ch === ",") {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += ch;
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.some((f) => f.trim() !== ""));
}

/** Each CSV row becomes one line of `column: value` pairs, so a row is a searchable unit. */
function csvToText(text: string): string {
  const rows = parseCsv(text);
  if (rows.length === 0) return "";
  const header = rows[0];
  return rows
    .slice(1)
    .map((row) => row.map((value, i) => `${header[i] ?? `column ${i + 1}`}: ${value}`).join("; ") + ".")
    .join("\n\n");
}

/** JSON becomes `path: value` lines, one per leaf. */
function jsonToText(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ExtractionError("the file is not valid JSON");
  }
  const lines: string[] = [];
  const walk = (node: unknown, path: string) => {
    if (lines.length > 200_000) return;
    if (Array.isArray(node)) node.forEach((item, i) => walk(item, `${path}[${i}]`));
    else if (node && typeof node === "object") for (const [k, v] of Object.entries(node)) walk(v, path ? `${path}.${k}` : k);
    else lines.push(`${path || "value"}: ${String(node)}`);
  };
  walk(value, "");
  return lines.join("\n");
}

/** DOCX is a zip; its body is word/document.xml, paragraphs `<w:p>` holding text runs `<w:t>`. */
function docxToText(bytes: Uint8Array): string {
  let files: Record<string, Uint8Array>;
  try {
    files = unzipSync(bytes, { filter: (file) => file.name === "word/document.xml" && file.originalSize < 64 * 1024 * 1024 });
  } catch {
    throw new ExtractionError("the DOCX file is corrupt (not a readable zip archive)");
  }
  const xml = files["word/document.xml"];
  if (!xml) throw new ExtractionError("the DOCX file has no word/document.xml");
  const body = decodeUtf8(xml);
  const paragraphs: string[] = [];
  for (const para of body.split(/<\/w:p>/)) {
    const heading = /<w:pStyle w:val="(?:Heading|heading|Title)(\d?)"/.exec(para);
    const runs: string[] = [];
    for (const match of para.matchAll(/<w:t(?:\s[^>]*)?>([^<]*)<\/w:t>|<w:tab\/>|<w:br\/>/g)) runs.push(match[1] !== undefined ? decodeEntities(match[1]) : match[0] === "<w:tab/>" ? "\t" : "\n");
    const text = runs.join("").trim();
    if (!text) continue;
    paragraphs.push(heading ? `${"#".repeat(Math.max(1, Number(heading[1] || "1")))} ${text}` : text);
  }
  return paragraphs.join("\n\n");
}

async function pdfToPages(bytes: Uint8Array): Promise<string[]> {
  const { extractText, getDocumentProxy } = await import("unpdf");
  try {
    const pdf = await getDocumentProxy(bytes.slice());
    const { text } = await extractText(pdf, { mergePages: false });
    return text.map((page) => page.replace(/[ \t]+/g, " ").trim());
  } catch (error) {
    const detail = error instanceof Error ? error.message : "unreadable";
    throw new ExtractionError(`the PDF file is corrupt or unreadable (${detail})`);
  }
}

export async function extractText(kind: FileKind, bytes: Uint8Array): Promise<ExtractedText> {
  switch (kind) {
    case "text":
    case "markdown":
      return { pages: [decodeUtf8(bytes)] };
    case "html":
      return { pages: [htmlToText(decodeUtf8(bytes))] };
    case "csv":
      return { pages: [csvToText(decodeUtf8(bytes))] };
    case "json":
      return { pages: [jsonToText(decodeUtf8(bytes))] };
    case "docx":
      return { pages: [docxToText(bytes)] };
    case "pdf":
      return { pages: await pdfToPages(bytes) };
  }
}
