// HTML pages Loom serves itself (the chat page, the public agent page). Every value is escaped;
// pages carry a strict Content-Security-Policy: scripts, styles and requests only from Loom's own
// origin, no inline script or style, no plugins, no forms posting elsewhere, and frame-ancestors
// as the caller decides.

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

/** `'none'` when the page may not be framed at all, `*` for anywhere, else the listed origins (and Loom itself). */
export type FrameAncestors = "none" | "any" | string[];

export function contentSecurityPolicy(frameAncestors: FrameAncestors): string {
  const ancestors =
    frameAncestors === "none" ? "'none'" : frameAncestors === "any" ? "*" : ["'self'", ...frameAncestors].join(" ");
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "media-src 'self' blob:",
    "form-action 'none'",
    "base-uri 'none'",
    "object-src 'none'",
    `frame-ancestors ${ancestors}`,
  ].join("; ");
}

/** Whether the request is from a browser asking for a page rather than a client asking for JSON. */
export function wantsHtml(accept: string | undefined): boolean {
  if (!accept) return false;
  const html = accept.indexOf("text/html");
  const json = accept.indexOf("application/json");
  return html >= 0 && (json < 0 || html < json);
}

export function htmlPage(input: {
  title: string;
  body: string;
  status?: number;
  frameAncestors: FrameAncestors;
  scripts?: string[];
  styles?: string[];
}): Response {
  const head = [
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    `<title>${escapeHtml(input.title)}</title>`,
    ...(input.styles ?? []).map((href) => `<link rel="stylesheet" href="${escapeHtml(href)}">`),
    ...(input.scripts ?? []).map((src) => `<script src="${escapeHtml(src)}" defer></script>`),
  ].join("\n");
  const html = `<!doctype html>\n<html lang="en">\n<head>\n${head}\n</head>\n<body>\n${input.body}\n</body>\n</html>\n`;
  return new Response(html, {
    status: input.status ?? 200,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": contentSecurityPolicy(input.frameAncestors),
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "permissions-policy": "microphone=(self), camera=(), geolocation=()",
      "cache-control": "no-store",
      vary: "accept",
    },
  });
}
