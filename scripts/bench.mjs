// `npm run bench [-- SECTION ...] [--base=URL]`: runs the benchmark sections in scripts/bench/*.mjs
// against a running Loom (`npm start`; default http://127.0.0.1:8787). A section either exports
// `run({ base, args })` or is a plain script that reads LOOM_URL (set here from --base); with no
// section names all run, in file-name order. Start the server with `npm start -- --no-rate-limits`:
// the sections send far more requests per key than the limits allow. `--help` lists the sections.
import { readdirSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { join } from "node:path";
import { requireLoom, takeBase } from "./loom-base.mjs";

const dir = fileURLToPath(new URL("./bench/", import.meta.url));
const { base, rest: argv } = takeBase(process.argv.slice(2), "bench");
const args = new Map(
  argv
    .filter((a) => a.startsWith("--"))
    .map((a) => {
      const [key, value] = a.replace(/^--/, "").split("=");
      return [key, value ?? "true"];
    }),
);
const wanted = argv.filter((a) => !a.startsWith("--"));
const sections = readdirSync(dir)
  .filter((f) => f.endsWith(".mjs"))
  .sort()
  .map((f) => f.replace(/\.mjs$/, ""));
if (args.has("help") || args.has("h")) {
  console.log(`usage: npm run bench [-- SECTION ...] [--base=URL] [section options]
  --base=URL   the Loom to measure (default http://127.0.0.1:8787; start it with npm start -- --no-rate-limits)
  SECTION      one or more of: ${sections.join(", ")} (default: all, in this order)
  other --options are passed to every section (see the header comment of scripts/bench/<section>.mjs)`);
  process.exit(0);
}
await requireLoom(base, "bench");
const unknown = wanted.filter((w) => !sections.includes(w));
if (unknown.length) {
  console.error(`unknown section(s): ${unknown.join(", ")}; available: ${sections.join(", ")}`);
  process.exit(2);
}
let failed = 0;
for (const name of wanted.length ? wanted : sections) {
  console.log(`\n## ${name}  (${base})`);
  const file = join(dir, `${name}.mjs`);
  if (/export\s+(async\s+)?function\s+run\b/.test(readFileSync(file, "utf8"))) {
    const section = await import(pathToFileURL(file).href);
    await section.run({ base, args });
  } else {
    const result = spawnSync(process.execPath, [file, ...argv.filter((a) => a.startsWith("--"))], {
      stdio: "inherit",
      env: { ...process.env, LOOM_URL: base, LOOM_BASE_URL: base },
    });
    if (result.status !== 0) failed += 1;
  }
}
process.exit(failed ? 1 : 0);
