// `npm run bench`: runs every section in scripts/bench/*.mjs, one after another, against a
// running Loom (`npm start`). LOOM_URL names it (default http://127.0.0.1:8787); extra
// arguments pick sections by file name (`npm run bench -- transformations`).
import { readdirSync } from "node:fs";
import { spawnSync } from "node:child_process";

const dir = new URL("./bench/", import.meta.url);
const only = process.argv.slice(2);
const sections = readdirSync(dir)
  .filter((file) => file.endsWith(".mjs"))
  .filter((file) => only.length === 0 || only.some((name) => file.startsWith(name)))
  .sort();
let failed = 0;
for (const file of sections) {
  console.log(`\n## ${file.replace(/\.mjs$/, "")}`);
  const result = spawnSync(process.execPath, [new URL(file, dir).pathname], { stdio: "inherit", env: process.env });
  if (result.status !== 0) failed += 1;
}
process.exit(failed ? 1 : 0);
