import type { Env } from "../../../env";
import { intSetting } from "../../../lib/config";
import { extractText, type ExtractedText, type FileKind } from "../extract-text";
import { PARSER_MAIN_MODULE, PARSER_VERSION } from "./generated/parser-bundle";
import type { ParserAnswer } from "./parser-guest";
import { ExtractionError } from "./parse-limits";

/**
 * Where a file's text is read. Formats whose work is not bounded by the upload's size (PDF
 * interpretation, zip inflation: DOCX and every later zip-based format) are read in a Dynamic
 * Worker, one isolate per organization, with a CPU budget: whatever slipped past PARSE_LIMITS
 * costs that isolate its budget, never the API Worker or another organization. The other
 * formats are read here by linear-time, output-capped readers. Without a loader (some local
 * set-ups) everything is read here, under the same PARSE_LIMITS but no CPU budget.
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

const LABEL: Record<FileKind, string> = { text: "text", markdown: "Markdown", html: "HTML", csv: "CSV", json: "JSON", pdf: "PDF", docx: "DOCX" };

/** Reads a file's text where parserPlacement says; ExtractionError for every way it can fail. */
export async function readDocumentText(env: Env, orgId: string, kind: FileKind, bytes: Uint8Array): Promise<ExtractedText> {
  const loader = env.LOADER;
  if (!loader || parserPlacement(env, kind) === "inline") return extractText(kind, bytes);
  const cpuMs = parseCpuMs(env);
  try {
    const worker = loader.get(`loom-parser-${PARSER_VERSION}-${orgId}`, () => ({
      compatibilityDate: "2026-11-01",
      mainModule: "parser.js",
      modules: { "parser.js": PARSER_MAIN_MODULE },
      env: {},
      globalOutbound: null,
    }));
    const response = await worker.getEntrypoint(undefined, { limits: { cpuMs } }).fetch(`http://parser/read?kind=${kind}`, { method: "POST", body: bytes });
    if (!response.ok) throw new Error(`parser answered ${response.status}`);
    const answer = (await response.json()) as ParserAnswer;
    if ("error" in answer) throw new ExtractionError(answer.error);
    return { pages: answer.pages };
  } catch (error) {
    if (error instanceof ExtractionError) throw error;
    // The isolate was stopped (CPU budget, its 128 MB of memory) or could not start.
    console.error("document parser failed", error);
    throw new ExtractionError(`the ${LABEL[kind]} file could not be read within the parser's limits (${cpuMs} ms of CPU, KB_PARSE_CPU_MS; 128 MB of memory)`);
  }
}
