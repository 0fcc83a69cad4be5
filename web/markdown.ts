// Everything a model, a visitor or a document says goes through here or through textContent:
// Markdown parsed by marked, then sanitized by DOMPurify to a short allow-list. No images at all
// (they would be requests to other hosts), links only http(s), opened in a new tab without a referrer.
import { marked } from "marked";
import DOMPurify from "dompurify";

const ALLOWED_TAGS = [
  "p",
  "br",
  "strong",
  "em",
  "del",
  "code",
  "pre",
  "blockquote",
  "ul",
  "ol",
  "li",
  "a",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "hr",
  "table",
  "thead",
  "tbody",
  "tr",
  "th",
  "td",
];

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  let safe = false;
  try {
    const url = new URL(href, location.href);
    safe = url.protocol === "https:" || url.protocol === "http:";
  } catch {
    safe = false;
  }
  if (!safe) node.removeAttribute("href");
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer nofollow");
});

/** Sanitized HTML for a Markdown answer, as a fragment ready to append. */
export function renderMarkdown(text: string): DocumentFragment {
  const html = marked.parse(text, { async: false, gfm: true, breaks: true });
  return DOMPurify.sanitize(html, { ALLOWED_TAGS, ALLOWED_ATTR: ["href", "target", "rel"], RETURN_DOM_FRAGMENT: true });
}
