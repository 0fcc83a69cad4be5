// Inline SVG icons, built as DOM nodes (no innerHTML, no icon font, no emoji): they render the
// same in every browser, headless Debian chromium included, whose fonts lack emoji glyphs.
// Paths are drawn on a 24x24 grid with round strokes in currentColor, so they follow the theme.
const SVG = "http://www.w3.org/2000/svg";

const PATHS = {
  chat: "M4 5h16v11H9l-5 4z",
  close: "M6 6l12 12M18 6L6 18",
  like: "M7 11v9H4v-9zM7 11l4-7c1.5 0 2.5 1 2 3l-1 3h6c1 0 2 1 1.7 2.2l-1.6 6.3c-.3 1-1 1.5-2 1.5H7",
  dislike: "M7 13V4H4v9zM7 13l4 7c1.5 0 2.5-1 2-3l-1-3h6c1 0 2-1 1.7-2.2l-1.6-6.3C17.8 2.5 17 2 16 2H7",
  attach: "M20 11.5l-8 8a5 5 0 01-7-7l8.5-8.5a3.3 3.3 0 014.7 4.7L9.7 17.2a1.7 1.7 0 01-2.4-2.4L15 7",
  mic: "M12 3a3 3 0 013 3v6a3 3 0 01-6 0V6a3 3 0 013-3zM5 11a7 7 0 0014 0M12 18v3",
  stop: "M7 7h10v10H7z",
  send: "M4 12l16-8-6 16-2-7z",
  plus: "M12 5v14M5 12h14",
} as const;

export type IconName = keyof typeof PATHS;

/** A decorative icon: hidden from screen readers, so the button around it carries the label. */
export function icon(name: IconName, size = 18): SVGSVGElement {
  const svg = document.createElementNS(SVG, "svg");
  for (const [key, value] of Object.entries({
    viewBox: "0 0 24 24",
    width: String(size),
    height: String(size),
    fill: "none",
    stroke: "currentColor",
    "stroke-width": "2",
    "stroke-linecap": "round",
    "stroke-linejoin": "round",
    "aria-hidden": "true",
    focusable: "false",
  }))
    svg.setAttribute(key, value);
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", PATHS[name]);
  svg.append(path);
  return svg;
}
