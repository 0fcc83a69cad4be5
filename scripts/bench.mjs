// `npm run bench [-- SECTION ...] [--base=URL]`: runs the benchmark sections in scripts/bench/*.mjs
// against a running Loom (`npm start`; default http://127.0.0.1:8787, or --base / LOOM_BASE_URL).
// Each section is a module exporting `run({ base, args })`; with no section names all run, in
// file-name order. Features add their own section file; this runner stays small.
import { readdirSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { join } from "node:path";

const dir = fileURLToPath(new URL("./bench/", import.meta.url));
const argv = process.argv.slice(2);
const args = new Map(argv.filter((a) => a.startsWith("--")).map((a) => {
  const [key, value] = a.replace(/^--/, "").split("=");
  return [key, value ?? "true"];
}));
const wanted = argv.filter((a) => !a.startsWith("--"));
const base = (args.get("base") ?? process.env.LOOM_BASE_URL ?? "http://127.0.0.1:8787").replace(/\/$/, "");

const sections = readdirSync(dir).filter((f) => f.endsWith(".mjs")).sort().map((f) => f.replace(/\.mjs$/, ""));
const unknown = wanted.filter((w) => !sections.includes(w));
if (unknown.length) {
  console.error(`unknown section(s): ${unknown.join(", ")}; available: ${sections.join(", ")}`);
  process.exit(2);
}
for (const name of wanted.length ? wanted : sections) {
  console.log(`\n## ${name}  (${base})`);
  const section = await import(pathToFileURL(join(dir, `${name}.mjs`)).href);
  await section.run({ base, args });
}
