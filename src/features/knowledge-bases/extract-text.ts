import { badRequest } from "../../lib/errors";
import { csvToText, jsonToText } from "./parsing/data-text";
import { docxToText } from "./parsing/docx-text";
import { htmlToText } from "./parsing/markup";
import { ExtractionError } from "./parsing/parse-limits";

/**
 * Text extraction for the file types Loom reads. `detectFileType` decides (and refuses unknown
 * types with a 400 naming them) before anything is stored; `extractText` may then fail on a
 * corrupt file or one past PARSE_LIMITS (parsing/parse-limits.ts), which fails only that document.
 * A zip-based kind (DOCX; any later XLSX, PPTX, ODT ...) opens its archive only through
 * parsing/zip-reader.ts and is listed in ISOLATED_KINDS (parsing/document-parser.ts).
 */
export type FileKind = "text" | "markdown" | "html" | "csv" | "json" | "pdf" | "docx";

export interface ExtractedText {
  /** One entry per page for paged formats (PDF), else one entry. */
  pages: string[];
}

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
  // With neither a type nor a name, say where they go: the natural guesses (`file_data.name`,
  // `file_data.file.name`) are not where Loom (and the hosted API) read them.
  const where =
    named === "unknown"
      ? '; name the file in file_data.file.metadata.name (e.g. "notes.md") or give its type in file_data.file.metadata.mime_type (e.g. "text/plain")'
      : "";
  throw badRequest(
    `unsupported file type: ${named} (Loom reads plain text, Markdown, HTML, CSV, JSON, PDF and DOCX)${where}`,
  );
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ExtractionError("the file is not valid UTF-8 text");
  }
}

/** Reads a PDF's pages. Only the parser's Dynamic Worker has one: pdf.js is not in the API Worker's bundle. */
export type PdfReader = (bytes: Uint8Array) => Promise<string[]>;

/**
 * Reads a file's text. Pure and bounded by PARSE_LIMITS; the caller decides where it runs
 * (parsing/document-parser.ts puts PDF and zip-based files in their own isolate, whose module,
 * parsing/parser-guest.ts, passes the PDF reader).
 */
export async function extractText(kind: FileKind, bytes: Uint8Array, readPdf?: PdfReader): Promise<ExtractedText> {
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
      if (!readPdf)
        throw new ExtractionError(
          "PDF files are read in the parser's Dynamic Worker (the LOADER binding, wrangler.toml [[worker_loaders]]), which this deployment lacks",
        );
      return { pages: await readPdf(bytes) };
  }
}
