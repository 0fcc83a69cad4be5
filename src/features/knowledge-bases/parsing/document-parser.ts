import type { Env } from "../../../env";
import { intSetting } from "../../../lib/config";
import { runtimeAsset } from "../../../lib/runtime-assets";
import { extractText, type ExtractedText, type FileKind } from "../extract-text";
import { PARSER_ASSET, PARSER_VERSION } from "./generated/parser-bundle";
import type { ParserAnswer } from "./parser-guest";
import { ExtractionError } from "./parse-limits";
import { causeChain, log } from "../../../lib/log";

/**
 * Where a file's text is read. Formats whose work is not bounded by the upload's size (PDF
 * interpretation, zip inflation: DOCX and every later zip-based format) are read in a Dynamic
 * Worker, one isolate per organization, with a CPU budget: whatever slipped past PARSE_LIMITS
 * costs that isolate its budget, never the API Worker or another organization. The other
 * formats are read here by linear-time, output-capped readers. Without a loader (some local
 * set-ups) DOCX is read here, under the same PARSE_LIMITS but no CPU budget, and a PDF fails
 * saying why: pdf.js lives only in the parser's module, a static asset (scripts/build-parser.mjs),
 * which only a Dynamic Worker can run (Workers never evaluate code fetched at run time).
 */
export const ISOLATED_KINDS: ReadonlySet<FileKind> = new Set<FileKind>(["pdf", "docx"]);

export const DEFAULT_PARSE_CPU_MS = 30_000;
const MAX_PARSE_CPU_MS = 300_000;

export function parseCpuMs(env: Env): number {
  return Math.min(intSetting(env.KB_PARSE_CPU_MS, DEFAULT_PARSE_CPU_MS), MAX_PARSE_CPU_MS);
}

export function parserPlacement(env: Env, kind: FileKind): "loader" | "inline" {
  return env.LOADER && ISOLATED_KINDS.has(kind) ? "loader" : "inline";
}

const LABEL: Record<FileKind, string> = {
  text: "text",
  markdown: "Markdown",
  html: "HTML",
  csv: "CSV",
  json: "JSON",
  pdf: "PDF",
  docx: "DOCX",
};

/** Reads a file's text where parserPlacement says; ExtractionError for every way it can fail. */
export async function readDocumentText(
  env: Env,
  orgId: string,
  kind: FileKind,
  bytes: Uint8Array,
): Promise<ExtractedText> {
  const loader = env.LOADER;
  if (!loader || parserPlacement(env, kind) === "inline") return extractText(kind, bytes);
  const cpuMs = parseCpuMs(env);
  const source = await parserSource(env);
  try {
    const worker = loader.get(`loom-parser-${PARSER_VERSION}-${orgId}`, () => ({
      compatibilityDate: "2026-11-01",
      mainModule: "parser.js",
      modules: { "parser.js": source },
      env: {},
      globalOutbound: null,
    }));
    const response = await worker
      .getEntrypoint(undefined, { limits: { cpuMs } })
      .fetch(`http://parser/read?kind=${kind}`, { method: "POST", body: bytes });
    if (!response.ok) throw new Error(`parser answered ${response.status}`);
    const answer = (await response.json()) as ParserAnswer;
    if ("error" in answer) throw new ExtractionError(answer.error);
    return { pages: answer.pages };
  } catch (error) {
    if (error instanceof ExtractionError) throw error;
    // The isolate was stopped (CPU budget, its 128 MB of memory) or could not start.
    log(env.LOG_LEVEL, "warn", "document_parser_failed", { org_id: orgId, kind, cause: causeChain(error) });
    throw new ExtractionError(
      `the ${LABEL[kind]} file could not be read within the parser's limits (${cpuMs} ms of CPU, KB_PARSE_CPU_MS; 128 MB of memory)`,
    );
  }
}

let decoded: { asset: string; source: string } | null = null;

/** The parser's module source, read from the static assets once per isolate. */
async function parserSource(env: Env): Promise<string> {
  if (decoded?.asset === PARSER_ASSET) return decoded.source;
  try {
    const source = new TextDecoder().decode(await runtimeAsset(env, PARSER_ASSET));
    decoded = { asset: PARSER_ASSET, source };
    return source;
  } catch (error) {
    // The document fails with the reason (a deployment without its assets), not the request.
    throw new ExtractionError(
      `the document parser is not available: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
