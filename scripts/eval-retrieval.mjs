// `npm run eval:retrieval [-- --base=URL]`: retrieval quality of Loom's knowledge bases, end to end
// through the public API of a running server (`npm start`; default http://127.0.0.1:8787, or
// --base=URL), side by side with LanceDB's full-text search on the same
// documents and queries. For each collection under --data (Cranfield: 1,400 aeronautics
// abstracts, 225 queries, graded judgements; CISI: 1,460 library-science abstracts, 76 judged long
// queries; see collections.mjs) it signs up a fresh user, creates an API key and a knowledge base,
// indexes every document (title + abstract) as one text file, runs every judged query with the
// default settings and in keyword and vector mode, runs LanceDB FTS (eval-lancedb.mjs: installed on
// demand into .eval/, never part of Loom), and prints nDCG@10 and Recall@100 with the ratio of
// Loom's default to LanceDB. Exits 1 when the default is under 1.10 x LanceDB or keyword-only
// under LanceDB (issue 14's targets), or when the default is below keyword alone.
//
// Relevance codes (cranqrel.readme): 1 complete answer ... 4 minimum interest; -1 (or 5) none.
// Gain = 5 - code for codes 1..4, else 0; Recall@100 counts codes 1..4 as relevant. Query numbers
// in cranqrel are the queries' ordinal positions in cran.qry (its .I ids skip numbers).
//
// Options: --data=DIR (the folder holding cranfield/ and cisi/; default ../shared/data), --concurrency=N (default 4), --chunk-size=N (default 400),
// --hybrid=rrf|weighted, --alpha=A (weighted hybrid only), --keep (keep the knowledge base and
// print how to reuse it), --reuse-NAME=KB:KEY (query an already indexed one; ids map by cran_id),
// --top-k=N (results asked per query, default 100; Recall@100 counts what comes back),
// --collections=cranfield,cisi, --no-lancedb (skip the LanceDB comparator),
// --no-prf (skip the `expand_query` rows: the default with the extra expanded query on and off;
// the default's own keyword feedback always runs), --modes=default,keyword,vector (which of the
// three to run; a variant's quick check needs only the default).
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { existsSync } from "node:fs";
import { ndcgAt, recallAt } from "./cranfield.mjs";
import { loadCollections } from "./collections.mjs";
import { lancedbRankings } from "./eval-lancedb.mjs";
import { requireLoom, takeBase } from "./loom-base.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const { base, rest } = takeBase(process.argv.slice(2), "eval:retrieval");
const args = new Map(
  rest
    .filter((a) => a.startsWith("--"))
    .map((arg) => {
      const [key, value] = arg.replace(/^--/, "").split("=");
      return [key, value ?? "true"];
    }),
);
// The collections sit in the shared data folder beside the checkout (../shared/data) or beside
// the folder of worktrees (../../shared/data): the first that exists is the default.
const dataDir =
  args.get("data") ??
  [join(root, "../shared/data"), join(root, "../../shared/data")].find((dir) => existsSync(dir)) ??
  join(root, "../shared/data");
const collectionNames = (args.get("collections") ?? "cranfield,cisi").split(",");
/** The default query must beat LanceDB's full-text search by this factor (issue 14). */
const TARGET_RATIO = 1.1;
await requireLoom(base, "eval:retrieval");
const concurrency = Number(args.get("concurrency") ?? 4);
const chunkSize = Number(args.get("chunk-size") ?? 400);
// Results asked per query: nDCG@10 needs 10, Recall@100 needs 100 (the candidate depth grows with it).
const topK = Number(args.get("top-k") ?? 100);
const hybridConfig = args.has("hybrid")
  ? { fusion_method: args.get("hybrid"), ...(args.has("alpha") ? { alpha: Number(args.get("alpha")) } : {}) }
  : undefined;

async function api(path, { method = "GET", body, token, form } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  let payload;
  if (form) {
    headers["content-type"] = "application/x-www-form-urlencoded";
    payload = new URLSearchParams(form).toString();
  } else if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(`${base}${path}`, { method, headers, body: payload });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${method} ${path} -> ${response.status} ${JSON.stringify(json)}`);
  return json;
}

async function pool(items, size, work) {
  let next = 0;
  const runners = Array.from({ length: size }, async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i], i);
    }
  });
  await Promise.all(runners);
}

/** Indexes one collection into a fresh knowledge base (or reuses --kb) and runs every mode over its judged queries. */
async function evaluate(collection) {
  const { docs, queries, qrels } = collection;
  // --reuse-NAME=KB:KEY (printed by --keep) queries a knowledge base indexed by an earlier run.
  const [reusedKb, reusedKey] = (args.get(`reuse-${collection.name}`) ?? args.get("kb") ?? "").split(":");
  let kb = reusedKb || undefined;
  let key = reusedKey || args.get("key");
  const reuse = Boolean(kb && key);
  const user = `eval${Date.now().toString(36)}${collection.name}`;
  if (!reuse) {
    const signup = await api("/auth/signup", {
      method: "POST",
      body: {
        email: `${user}@example.com`,
        password: "evaluation-password",
        username: user,
        organization: `${user}-org`,
      },
    });
    key = (
      await api("/auth/api-keys", { method: "POST", token: signup.access_token, body: { name: "eval-retrieval" } })
    ).key;
    kb = (
      await api("/v1/knowledge-base", {
        method: "POST",
        token: key,
        body: { name: collection.name, chunk_size: chunkSize },
      })
    ).id;
  }

  const started = Date.now();
  const docByLoomId = new Map();
  // A document with no text at all (Cranfield has one) is refused by the index route (400: nothing
  // to search); it can match no query in any engine, so it is left out and counted.
  const indexable = docs.filter((doc) => `${doc.title}${doc.body}`.trim() !== "");
  if (indexable.length < docs.length)
    console.log(`${collection.name}: ${docs.length - indexable.length} document(s) without text left out`);
  await pool(reuse ? [] : indexable, concurrency, async (doc) => {
    const text = `${doc.title}\n\n${doc.body}`;
    const result = await api(`/v1/knowledge-base/${kb}/index`, {
      method: "POST",
      token: key,
      body: {
        file_data: {
          file: {
            type: "file",
            raw_bytes: Buffer.from(text).toString("base64"),
            metadata: { name: `${collection.name}-${doc.id}.txt`, mime_type: "text/plain" },
          },
          custom_metadata: { cran_id: doc.id },
        },
      },
    });
    docByLoomId.set(result.document_ids[0], doc.id);
  });
  const indexSeconds = (Date.now() - started) / 1000;
  if (!reuse)
    console.log(
      `\n${collection.name}: indexed ${indexable.length} documents in ${indexSeconds.toFixed(1)} s (${base}, knowledge base ${kb})`,
    );

  const wanted = new Set((args.get("modes") ?? "default,keyword,vector").split(","));
  const modes = [
    ["default", {}],
    ["keyword", { retrieval_config: { search_mode: "keyword" } }],
    ["vector", { retrieval_config: { search_mode: "vector" } }],
  ].filter(([mode]) => wanted.has(mode));
  if (hybridConfig)
    modes.push(["hybrid*", { retrieval_config: { search_mode: "hybrid" }, hybrid_search_config: hybridConfig }]);
  // The offline query options: pseudo-relevance feedback runs with no model connection.
  if (!args.has("no-prf")) {
    modes.push(["default+prf", { expand_query: true }]);
    modes.push(["default-prf", { expand_query: false }]);
  }
  const judgedQueries = queries.filter((q) => qrels.has(q.number));
  const rows = [];
  for (const [mode, config] of modes) {
    let ndcg = 0;
    let recall = 0;
    const t0 = Date.now();
    await pool(judgedQueries, concurrency, async (q) => {
      const gains = qrels.get(q.number);
      const res = await api(`/v1/knowledge-base/${kb}/query`, {
        method: "POST",
        token: key,
        body: {
          queries: [q.text],
          search_metadata: { top_k: topK },
          config: { ...config, retrieval_unit: "documents" },
        },
      });
      const ranked = res.result.documents.map((d) => docByLoomId.get(d.document_id) ?? String(d.metadata.cran_id));
      ndcg += ndcgAt(ranked, gains, 10);
      recall += recallAt(ranked, gains, 100);
    });
    rows.push({
      mode,
      ndcg: ndcg / judgedQueries.length,
      recall: recall / judgedQueries.length,
      queries: judgedQueries.length,
      ms: (Date.now() - t0) / judgedQueries.length,
    });
  }
  if (!args.has("no-lancedb")) {
    const t0 = Date.now();
    const rankings = await lancedbRankings(root, collection, 100);
    let ndcg = 0;
    let recall = 0;
    for (const q of judgedQueries) {
      ndcg += ndcgAt(rankings.get(q.number), qrels.get(q.number), 10);
      recall += recallAt(rankings.get(q.number), qrels.get(q.number), 100);
    }
    rows.push({
      mode: "lancedb-fts",
      ndcg: ndcg / judgedQueries.length,
      recall: recall / judgedQueries.length,
      queries: judgedQueries.length,
      ms: (Date.now() - t0) / judgedQueries.length,
    });
  }
  if (args.has("keep")) console.log(`kept: --reuse-${collection.name}=${kb}:${key}`);
  else if (!reuse) await api(`/v1/knowledge-base/${kb}`, { method: "DELETE", token: key });
  return rows;
}

async function main() {
  const collections = loadCollections(dataDir, collectionNames);
  const results = [];
  for (const collection of collections) results.push({ name: collection.name, rows: await evaluate(collection) });
  let failed = false;
  for (const { name, rows } of results) {
    console.log(`\n${name}: mode       nDCG@10  Recall@100  (queries, mean ms/query)`);
    for (const r of rows)
      console.log(
        `  ${r.mode.padEnd(18)} ${r.ndcg.toFixed(4)}   ${r.recall.toFixed(4)}      (${r.queries}, ${r.ms.toFixed(1)})`,
      );
    const find = (mode) => rows.find((r) => r.mode === mode);
    const [plain, withPrf, withoutPrf, keyword, lance] = [
      "default",
      "default+prf",
      "default-prf",
      "keyword",
      "lancedb-fts",
    ].map(find);
    if (withPrf && withoutPrf)
      console.log(
        `  expand_query on vs off: nDCG@10 ${(withPrf.ndcg - withoutPrf.ndcg >= 0 ? "+" : "") + (withPrf.ndcg - withoutPrf.ndcg).toFixed(4)}`,
      );
    if (lance && plain) {
      const ratio = plain.ndcg / lance.ndcg;
      console.log(
        `  Loom default / LanceDB FTS: ${ratio.toFixed(3)} (target >= ${TARGET_RATIO}); keyword-only / LanceDB: ${keyword ? (keyword.ndcg / lance.ndcg).toFixed(3) : "-"} (target >= 1)`,
      );
      if (ratio < TARGET_RATIO || (keyword && keyword.ndcg < lance.ndcg)) failed = true;
    }
    if (keyword && plain && plain.ndcg < keyword.ndcg) {
      console.log(`  default nDCG@10 ${plain.ndcg.toFixed(4)} is below keyword ${keyword.ndcg.toFixed(4)}`);
      failed = true;
    }
  }
  if (failed) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
