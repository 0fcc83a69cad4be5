/**
 * Limits on the work one uploaded file may cause while its text is read. Every limit counts what
 * is actually produced (inflated bytes, decoded stream bytes, characters), never what a file's
 * headers declare, so a file that lies about its sizes stops at the same point as one that does not.
 */

/** A file whose text cannot be read; it fails only its own document, with this message. */
export class ExtractionError extends Error {}

export const PARSE_LIMITS = {
  /** Entries a zip-based file (DOCX and any other) may list in its central directory. */
  zipEntries: 10_000,
  /** Bytes inflated from one zip-based file, over every entry read. */
  zipInflatedBytes: 32 * 1024 * 1024,
  /** Inflated size over compressed size, for an entry past `zipRatioFloorBytes`. */
  zipRatio: 100,
  /** Output below this is never judged by its ratio (small, repetitive XML parts are normal). */
  zipRatioFloorBytes: 1024 * 1024,
  /** Bytes one PDF stream (content, font, object stream ...) may decode to. */
  pdfStreamBytes: 16 * 1024 * 1024,
  /** Bytes all of one PDF's streams may decode to, counted each time pdf.js decodes one. */
  pdfDecodedBytes: 128 * 1024 * 1024,
  /** Pages read from one PDF. */
  pdfPages: 5_000,
  /** Characters of text one file may give (CSV and JSON repeat headers and paths, so can grow). */
  textChars: 32 * 1024 * 1024,
  /** Nesting of arrays and objects in a JSON file. */
  jsonDepth: 64,
} as const;

/** Counts characters of extracted text and stops past the limit. */
export class TextBudget {
  private used = 0;

  constructor(
    private readonly label: string,
    private readonly limit: number = PARSE_LIMITS.textChars,
  ) {}

  /** Records `chars` more characters; throws once the file has given more than the limit. */
  spend(chars: number): void {
    this.used += chars;
    if (this.used > this.limit)
      throw new ExtractionError(
        `the ${this.label} file gives more than ${this.limit} characters of text; Loom reads at most ${this.limit}`,
      );
  }
}
