// `npm run check:bundle` (run by CI, .ci/run): bundles the Worker exactly as `wrangler deploy`
// would (`--dry-run`, offline), prints each uploaded module's size, raw and gzipped, and fails
// when the gzipped total passes the Workers free plan's limit of 3 MB: past it a newcomer on the
// free plan cannot deploy at all. Large data and code that is only needed on first use belongs
// in the static assets (public/_loom/, see src/lib/runtime-assets.ts), not in the bundle.
// Options: --limit=BYTES (default 3000000), --keep (leave the bundle in .wrangler/check-bundle).
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const root = fileURLToPath(new URL("..", import.meta.url));
const args = new Map(
  process.argv.slice(2).map((arg) => [arg.replace(/^--/, "").split("=")[0], arg.split("=")[1] ?? "true"]),
);
if (args.has("help")) {
  console.log(
    "npm run check:bundle [-- --limit=BYTES] [-- --keep]: fails when the Worker bundle passes LIMIT bytes gzipped (default 3000000)",
  );
  process.exit(0);
}
// 3 MB as 3,000,000 bytes: a little under Cloudflare's 3 MiB, so passing here passes there.
const limit = Number(args.get("limit") ?? 3_000_000);
const outdir = path.join(root, ".wrangler/check-bundle");
const wrangler = path.join(
  path.dirname(createRequire(import.meta.url).resolve("wrangler/package.json")),
  "bin/wrangler.js",
);

rmSync(outdir, { recursive: true, force: true });
const result = await new Promise((resolve) => {
  const child = spawn(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", outdir], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
  });
  let output = "";
  child.stdout.on("data", (data) => (output += data));
  child.stderr.on("data", (data) => (output += data));
  child.on("close", (code) => resolve({ code: code ?? 1, output }));
});
if (result.code !== 0) {
  process.stderr.write(result.output);
  console.error("check:bundle: wrangler deploy --dry-run failed (see above)");
  process.exit(1);
}

// What a deploy uploads: the entry and the modules it imports, never the source map (wrangler.toml
// sets upload_source_maps = false) or wrangler's README.
const files = readdirSync(outdir).filter((file) => !file.endsWith(".map") && file !== "README.md");
const rows = files.map((file) => {
  const bytes = readFileSync(path.join(outdir, file));
  return { file, raw: statSync(path.join(outdir, file)).size, gzip: gzipSync(bytes, { level: 9 }).length };
});
rows.sort((a, b) => b.gzip - a.gzip);
const total = rows.reduce((sum, row) => ({ raw: sum.raw + row.raw, gzip: sum.gzip + row.gzip }), { raw: 0, gzip: 0 });
const mb = (bytes) => `${(bytes / 1_000_000).toFixed(2)} MB`;
for (const row of rows)
  console.log(
    `${mb(row.gzip).padStart(9)} gzipped  ${mb(row.raw).padStart(9)} raw  ${row.file.replace(/^[0-9a-f]{40}-/, "")}`,
  );
// wrangler's own figure, as `wrangler deploy` prints it, for comparison.
const reported = /Total Upload: ([\d.]+ KiB) \/ gzip: ([\d.]+ KiB)/.exec(result.output);
console.log(
  `${mb(total.gzip).padStart(9)} gzipped  ${mb(total.raw).padStart(9)} raw  total${reported ? ` (wrangler: ${reported[1]} / gzip ${reported[2]})` : ""}`,
);
if (!args.has("keep")) rmSync(outdir, { recursive: true, force: true });
if (total.gzip > limit) {
  console.error(
    `check:bundle: the Worker is ${mb(total.gzip)} gzipped, over the ${mb(limit)} limit (Workers free plan: 3 MB). Move data or code needed only on first use to the static assets (src/lib/runtime-assets.ts).`,
  );
  process.exit(1);
}
console.log(
  `check:bundle: ${mb(total.gzip)} gzipped, under the ${mb(limit)} limit (${mb(limit - total.gzip)} to spare)`,
);
