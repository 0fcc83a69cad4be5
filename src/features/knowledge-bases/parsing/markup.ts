/**
 * Markup helpers shared by the HTML reader, the DOCX reader and the outside sources. Each runs
 * in time linear in its input: an upload full of unclosed tags or comments cannot make a
 * pattern rescan the rest of the file for every `<`.
 */
import { decodeHTML } from "entities/decode";

/**
 * Character references in text taken from HTML or XML, decoded by the `entities` package (the
 * WHATWG table of ~2,200 named references, numeric ones, and the legacy forms without `;`), so
 * `caf&eacute;` is indexed as `café` whatever the name. One linear pass over the text.
 */
export function decodeEntities(text: string): string {
  return decodeHTML(text);
}

const HIDDEN = new Set(["script", "style", "noscript", "template"]);
const BLOCKS = new Set([
  "p",
  "div",
  "br",
  "li",
  "tr",
  "section",
  "article",
  "header",
  "footer",
  "ul",
  "ol",
  "table",
  "blockquote",
  "pre",
]);

/** Visible text of an HTML page: scripts and styles dropped, block elements become line breaks. */
export function htmlToText(html: string): string {
  const out: string[] = [];
  // Hidden elements whose closing tag does not occur after some point cannot close later either.
  const unclosed = new Set<string>();
  let at = 0;
  while (at < html.length) {
    const lt = html.indexOf("<", at);
    if (lt < 0) {
      out.push(html.slice(at));
      break;
    }
    out.push(html.slice(at, lt));
    if (html.startsWith("<!--", lt)) {
      // An unclosed comment runs to the end of the page, as in a browser.
      const end = html.indexOf("-->", lt + 4);
      out.push(" ");
      at = end < 0 ? html.length : end + 3;
      continue;
    }
    const gt = html.indexOf(">", lt + 1);
    if (gt < 0) {
      // No tag can end after this point: the rest is text.
      out.push(html.slice(lt));
      break;
    }
    at = gt + 1;
    const tag = /^(\/?)([a-z][a-z0-9]*)/i.exec(html.slice(lt + 1, Math.min(gt, lt + 16)));
    const closing = tag?.[1] === "/";
    const name = tag?.[2].toLowerCase() ?? "";
    if (!closing && HIDDEN.has(name) && !unclosed.has(name)) {
      const close = new RegExp(`</${name}\\s*>`, "gi");
      close.lastIndex = at;
      const found = close.exec(html);
      if (found) {
        out.push(" ");
        at = found.index + found[0].length;
        continue;
      }
      unclosed.add(name);
    }
    const heading = /^h([1-6])$/.exec(name);
    if (heading) out.push(closing ? "\n\n" : `\n\n${"#".repeat(Number(heading[1]))} `);
    else if (BLOCKS.has(name)) out.push("\n");
    else out.push(" ");
  }
  return decodeEntities(out.join(""))
    .split("\n")
    .map((line) => line.replace(/[ \t\f\v]+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}
