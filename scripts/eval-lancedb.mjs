// LanceDB's full-text search as the comparator of `npm run eval:retrieval`: same documents
// (title + abstract), same queries, BM25 with LanceDB's English stemming and stop words.
// @lancedb/lancedb is a large native package, so it is never a dependency of Loom: it is installed
// on demand into .eval/ (git-ignored) the first time the evaluation runs, and never bundled into
// the Worker.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const LANCEDB_VERSION = "0.39.0";

/** Imports @lancedb/lancedb from `<root>/.eval`, installing it there first if it is missing. */
async function loadLancedb(root) {
  const prefix = join(root, ".eval");
  if (!existsSync(join(prefix, "node_modules/@lancedb/lancedb"))) {
    console.log(`installing @lancedb/lancedb@${LANCEDB_VERSION} into .eval/ (once; not part of Loom's install)`);
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const run = spawnSync(
      npm,
      [
        "install",
        "--prefix",
        prefix,
        "--no-save",
        "--no-package-lock",
        "--no-audit",
        "--no-fund",
        `@lancedb/lancedb@${LANCEDB_VERSION}`,
      ],
      { stdio: "inherit" },
    );
    if (run.status !== 0) throw new Error("installing @lancedb/lancedb into .eval/ failed");
  }
  const require = createRequire(join(prefix, "package.json"));
  return import(pathToFileURL(require.resolve("@lancedb/lancedb")).href);
}

/**
 * Ranks every query's top `k` document ids with LanceDB's FTS over a throwaway table in a temp
 * folder. Returns query number -> ranked ids.
 */
export async function lancedbRankings(root, collection, k) {
  const lancedb = await loadLancedb(root);
  const dir = mkdtempSync(join(tmpdir(), "loom-eval-lancedb-"));
  try {
    const db = await lancedb.connect(dir);
    const rows = collection.docs.map((d) => ({ id: d.id, text: `${d.title}\n\n${d.body}` }));
    const table = await db.createTable(collection.name, rows, { mode: "overwrite" });
    await table.createIndex("text", {
      config: lancedb.Index.fts({
        language: "English",
        stem: true,
        removeStopWords: true,
        lowercase: true,
        asciiFolding: true,
        withPosition: false,
      }),
    });
    const out = new Map();
    for (const q of collection.queries) {
      if (!collection.qrels.has(q.number)) continue;
      const hits = await table.search(q.text, "fts").select(["id", "_score"]).limit(k).toArray();
      out.set(
        q.number,
        hits.map((h) => String(h.id)),
      );
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
