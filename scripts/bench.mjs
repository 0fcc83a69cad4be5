// `npm run bench`: runs every scripts/bench/*.mjs section against a running Loom (`npm start`).
// LOOM_URL picks the server (default http://127.0.0.1:8787); extra arguments name sections to run.
import { readdirSync } from "node:fs";
import { spawnSync } from "node:child_process";

const dir = new URL("./bench/", import.meta.url);
const only = process.argv.slice(2);
const sections = readdirSync(dir)
  .filter((f) => f.endsWith(".mjs"))
  .filter((f) => only.length === 0 || only.includes(f.replace(/\.mjs$/, "")))
  .sort();
let failed = 0;
for (const file of sections) {
  console.log(`\n== ${file} ==`);
  const result = spawnSync(process.execPath, [new URL(file, dir).pathname], { stdio: "inherit", env: process.env });
  if (result.status !== 0) failed += 1;
}
process.exit(failed > 0 ? 1 : 0);
