// The parser's Dynamic Worker: no bindings, no network (globalOutbound null). It receives one
// file as the request body (its kind in the query) and answers its pages, or the reason it
// could not be read, as JSON. Its isolate has its own memory and the CPU budget the caller set.
// It alone holds pdf.js: scripts/build-parser.mjs bundles it into a static asset (public/_loom/).
import { extractText, type FileKind } from "../extract-text";
import { ExtractionError } from "./parse-limits";

/** pdf.js is initialised on first use: reading a DOCX file never needs it. */
const readPdf = async (bytes: Uint8Array): Promise<string[]> => (await import("./pdf-text")).pdfToPages(bytes);

export type ParserAnswer = { pages: string[] } | { error: string };

export default {
  async fetch(request: Request): Promise<Response> {
    const kind = new URL(request.url).searchParams.get("kind") as FileKind;
    const bytes = new Uint8Array(await request.arrayBuffer());
    try {
      const answer: ParserAnswer = { pages: (await extractText(kind, bytes, readPdf)).pages };
      return Response.json(answer);
    } catch (error) {
      const answer: ParserAnswer = {
        error:
          error instanceof ExtractionError
            ? error.message
            : `the file could not be read (${error instanceof Error ? error.message : "unknown error"})`,
      };
      return Response.json(answer);
    }
  },
};
