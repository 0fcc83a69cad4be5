// `npm run build:web`: bundles the browser code in web/ into public/, which wrangler.toml serves
// as Workers static assets: /widget.js (the embed snippet's script), /chat.js and /chat.css (the
// chat page's code). Prints each file's gzipped size and fails if /widget.js passes 30 KB gzipped.
// (The browser suite measures the same figures as served, the chat page's HTML included.)
import { build } from "esbuild";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = fileURLToPath(new URL("..", import.meta.url));
const out = path.join(root, "public");
const WIDGET_LIMIT = 30 * 1024;

// Only this step's own files: public/docs/ belongs to scripts/build-docs-assets.mjs.
for (const file of ["widget.js", "chat.js", "chat.css"]) rmSync(path.join(out, file), { force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { widget: path.join(root, "web/widget.ts"), chat: path.join(root, "web/chat.ts") },
  outdir: out,
  bundle: true,
  minify: true,
  format: "iife",
  // Browsers from 2022 on: fewer down-levelled helpers than es2020, ~0.3 KB gzipped less.
  target: "es2022",
  charset: "utf8",
  legalComments: "none",
  logLevel: "warning",
});
await build({
  entryPoints: [path.join(root, "web/chat.css")],
  outfile: path.join(out, "chat.css"),
  minify: true,
  logLevel: "warning",
});

for (const file of ["widget.js", "chat.js", "chat.css"]) {
  const size = gzipSync(readFileSync(path.join(out, file))).length;
  console.log(`public/${file}: ${(size / 1024).toFixed(1)} KB gzipped`);
  if (file === "widget.js" && size > WIDGET_LIMIT) {
    console.error(`build:web: widget.js is ${size} bytes gzipped, over the ${WIDGET_LIMIT}-byte budget`);
    process.exit(1);
  }
}
