// `npm run build` (run by `npm install`, `npm test`, `npm start` and `npm run dev` first): runs each
// generated-file step whose inputs changed since it last ran, and skips the others. On a loaded
// 2-core machine the sandbox step alone takes 20 s and the whole build 40 s, which every `npm test`
// used to pay although nothing it reads had changed.
//
// A step is up to date when the hash of its inputs (its script, package-lock.json for everything
// it reads from node_modules, and its source files, followed through their relative imports) and
// the hash of its outputs both match what was recorded after its last successful run; an output
// deleted or edited by hand therefore rebuilds it too. Records live in node_modules/.cache/, so a
// fresh install always builds. `--force` runs every step; `npm run build:<step>` runs one directly.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const stamps = path.join(root, "node_modules/.cache/loom-build");
const force = process.argv.includes("--force");

/** Each step: its script, the source files it reads (entries; relative imports are followed), and what it writes. */
const steps = [
  {
    name: "embeddings",
    script: "scripts/distill-embeddings.mjs",
    sources: [],
    outputs: ["src/providers/generated/static-use.bin"],
  },
  {
    // Publishes the table as public/_loom/static-use-256.<hash>.bin; the parser step shares that
    // folder, so each step names only its own files there (a trailing * is a file-name prefix).
    name: "embedding-asset",
    script: "scripts/build-embedding-asset.mjs",
    sources: ["src/providers/generated/static-use.bin"],
    outputs: ["src/providers/generated/static-use-asset.ts", "public/_loom/static-use-256.*"],
  },
  {
    name: "sandbox",
    script: "scripts/meter-wasm.mjs",
    sources: ["src/sandbox/guest-javascript.ts", "src/sandbox/guest-python.ts"],
    outputs: ["src/sandbox/generated"],
  },
  {
    name: "kernel",
    script: "scripts/build-vector-kernel.mjs",
    sources: ["src/features/knowledge-bases/index/kernels/int8-dot.wat"],
    outputs: ["src/features/knowledge-bases/index/kernels/generated"],
  },
  {
    name: "parser",
    script: "scripts/build-parser.mjs",
    sources: ["src/features/knowledge-bases/parsing/parser-guest.ts"],
    outputs: ["src/features/knowledge-bases/parsing/generated", "public/_loom/parser.*"],
  },
  {
    name: "web",
    script: "scripts/build-web.mjs",
    sources: ["web/widget.ts", "web/chat.ts", "web/chat.css"],
    outputs: ["public/widget.js", "public/chat.js", "public/chat.css"],
  },
  {
    name: "docs",
    script: "scripts/build-docs-assets.mjs",
    sources: ["src/features/docs/browser/loom-docs.js"],
    outputs: ["public/docs"],
  },
];

const IMPORT = /(?:import|export)\s[^;]*?from\s*["'](\.[^"']+)["']|import\s*\(?\s*["'](\.[^"']+)["']/g;

/** The entry files plus every file they reach through relative imports (package imports are covered by the lock file). */
function sourceClosure(entries) {
  const seen = new Set();
  const queue = entries.map((entry) => path.join(root, entry));
  while (queue.length > 0) {
    const file = queue.pop();
    if (seen.has(file) || !existsSync(file)) continue;
    seen.add(file);
    if (!/\.[cm]?[jt]s$/.test(file)) continue;
    for (const match of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = path.resolve(path.dirname(file), match[1] ?? match[2]);
      const candidates = [target, `${target}.ts`, target.replace(/\.js$/, ".ts"), path.join(target, "index.ts")];
      const found = candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
      if (found) queue.push(found);
    }
  }
  return [...seen].sort();
}

/** The files a `folder/prefix*` output names: those in the folder whose name starts with the prefix. */
function prefixed(output) {
  const full = path.join(root, output.slice(0, -1));
  const dir = path.dirname(full);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => name.startsWith(path.basename(full)))
    .map((name) => path.join(dir, name));
}

function outputExists(output) {
  return output.endsWith("*") ? prefixed(output).length > 0 : existsSync(path.join(root, output));
}

/** Every file under the given paths (files, folders or `prefix*`), sorted, so the hash does not depend on listing order. */
function filesUnder(paths) {
  const files = [];
  const walk = (full) => {
    if (!existsSync(full)) return;
    if (statSync(full).isDirectory()) for (const name of readdirSync(full)) walk(path.join(full, name));
    else files.push(full);
  };
  for (const entry of paths) {
    if (entry.endsWith("*")) files.push(...prefixed(entry));
    else walk(path.join(root, entry));
  }
  return files.sort();
}

/** sha256 over names and contents; null when any expected file is missing. */
function hashFiles(files) {
  const hash = createHash("sha256");
  for (const file of files) {
    if (!existsSync(file)) return null;
    hash.update(path.relative(root, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex");
}

function outputsHash(step) {
  if (!step.outputs.every(outputExists)) return null;
  return hashFiles(filesUnder(step.outputs));
}

mkdirSync(stamps, { recursive: true });
for (const step of steps) {
  // A guest importing its own generated wasm must not count that output as an input.
  const ownOutputs = step.outputs.filter((output) => !output.endsWith("*")).map((output) => path.join(root, output));
  const sources = sourceClosure(step.sources).filter(
    (file) => !ownOutputs.some((output) => file === output || file.startsWith(`${output}${path.sep}`)),
  );
  const inputs = hashFiles([path.join(root, step.script), path.join(root, "package-lock.json"), ...sources]);
  const stampPath = path.join(stamps, `${step.name}.json`);
  const stamp = existsSync(stampPath) ? JSON.parse(readFileSync(stampPath, "utf8")) : null;
  const outputs = outputsHash(step);
  if (!force && outputs !== null && stamp?.inputs === inputs && stamp.outputs === outputs) continue;
  // Each step runs in the same Node binary (the project's node@22), with this process's npm
  // lifecycle variables, so the scripts behave as under `npm run build:<step>`.
  const run = spawnSync(process.execPath, [path.join(root, step.script)], { cwd: root, stdio: "inherit" });
  if (run.status !== 0) {
    console.error(`build: step ${step.name} (${step.script}) failed`);
    process.exit(run.status ?? 1);
  }
  writeFileSync(stampPath, `${JSON.stringify({ inputs, outputs: outputsHash(step) })}\n`);
}
