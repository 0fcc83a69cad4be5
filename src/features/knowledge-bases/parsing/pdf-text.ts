import { getDocument, loomSetDecodeMeter, type DecodeMeter } from "./generated/pdfjs.mjs";
import { ExtractionError, PARSE_LIMITS, TextBudget } from "./parse-limits";

/**
 * PDF text through pdf.js (unpdf's serverless build, patched at build time with a decode meter:
 * scripts/build-parser.mjs). pdf.js inflates a stream to whatever size it holds; the meter stops
 * one stream at `pdfStreamBytes` and a document at `pdfDecodedBytes`, counted as decoded.
 */

class DocumentDecodeMeter implements DecodeMeter {
  private total = 0;
  /** Why decoding stopped; kept, since pdf.js swallows some errors and carries on. */
  tripped?: string;

  grow(size: number, before: number): void {
    if (this.tripped === undefined) {
      if (size > PARSE_LIMITS.pdfStreamBytes) {
        this.tripped = `the PDF file holds a stream that decodes past ${PARSE_LIMITS.pdfStreamBytes} bytes; Loom decodes at most ${PARSE_LIMITS.pdfStreamBytes} bytes per stream`;
      } else if ((this.total += size - before) > PARSE_LIMITS.pdfDecodedBytes) {
        this.tripped = `the PDF file's streams decode past ${PARSE_LIMITS.pdfDecodedBytes} bytes; Loom decodes at most ${PARSE_LIMITS.pdfDecodedBytes} bytes per document`;
      }
    }
    if (this.tripped !== undefined) throw new Error(this.tripped);
  }
}

// pdf.js reports to one module-wide meter, so documents are read one at a time per isolate;
// each is bounded by the limits above, and the CPU is one thread either way.
let queue: Promise<unknown> = Promise.resolve();

export function pdfToPages(bytes: Uint8Array): Promise<string[]> {
  const run = queue.then(() => readPdf(bytes));
  queue = run.catch(() => undefined);
  return run;
}

async function readPdf(bytes: Uint8Array): Promise<string[]> {
  const meter = new DocumentDecodeMeter();
  loomSetDecodeMeter(meter);
  const task = getDocument({
    data: bytes.slice(),
    useSystemFonts: false,
    disableFontFace: true,
    enableXfa: false,
    verbosity: 0,
  });
  try {
    const pdf = await task.promise;
    if (pdf.numPages > PARSE_LIMITS.pdfPages)
      throw new ExtractionError(`the PDF file has ${pdf.numPages} pages; Loom reads at most ${PARSE_LIMITS.pdfPages}`);
    const budget = new TextBudget("PDF");
    const pages: string[] = [];
    // One page at a time (not all at once), so a page count cannot fan out into that many reads.
    for (let number = 1; number <= pdf.numPages && meter.tripped === undefined; number++) {
      const page = await pdf.getPage(number);
      const content = await page.getTextContent();
      const text = content.items
        .map((item) => ("str" in item ? item.str + (item.hasEOL ? "\n" : "") : ""))
        .join("")
        .replace(/[ \t]+/g, " ")
        .trim();
      page.cleanup();
      budget.spend(text.length);
      pages.push(text);
    }
    if (meter.tripped !== undefined) throw new ExtractionError(meter.tripped);
    return pages;
  } catch (error) {
    if (meter.tripped !== undefined) throw new ExtractionError(meter.tripped);
    if (error instanceof ExtractionError) throw error;
    const detail = error instanceof Error ? error.message : "unreadable";
    throw new ExtractionError(`the PDF file is corrupt or unreadable (${detail})`);
  } finally {
    loomSetDecodeMeter(null);
    await task.destroy();
  }
}
