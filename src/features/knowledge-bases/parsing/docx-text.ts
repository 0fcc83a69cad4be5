import { decodeEntities } from "./markup";
import { ExtractionError } from "./parse-limits";
import { readZipEntries } from "./zip-reader";

const DOCUMENT = "word/document.xml";

/**
 * DOCX is a zip; its body is word/document.xml, paragraphs `<w:p>` holding text runs `<w:t>`.
 * The patterns below never let one quantifier cross a `<`, so each character is looked at a
 * bounded number of times whatever the markup (no quadratic backtracking on unclosed tags).
 */
export function docxToText(bytes: Uint8Array): string {
  const xml = readZipEntries(bytes, "DOCX", (name) => name === DOCUMENT).get(DOCUMENT);
  if (!xml) throw new ExtractionError("the DOCX file has no word/document.xml");
  let body: string;
  try {
    body = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(xml);
  } catch {
    throw new ExtractionError("the DOCX file's word/document.xml is not valid UTF-8");
  }
  const paragraphs: string[] = [];
  for (const para of body.split("</w:p>")) {
    const heading = /<w:pStyle w:val="(?:Heading|heading|Title)(\d?)"/.exec(para);
    const runs: string[] = [];
    for (const match of para.matchAll(/<w:t(?:\s[^<>]*)?>([^<]*)<\/w:t>|<w:tab\/>|<w:br\/>/g)) {
      runs.push(match[1] !== undefined ? decodeEntities(match[1]) : match[0] === "<w:tab/>" ? "\t" : "\n");
    }
    const text = runs.join("").trim();
    if (!text) continue;
    paragraphs.push(heading ? `${"#".repeat(Math.max(1, Number(heading[1] || "1")))} ${text}` : text);
  }
  return paragraphs.join("\n\n");
}
