// `npm run eval:retrieval [-- --base=URL]`: retrieval quality of Loom's knowledge bases, end to end
// through the public API of a running server (`npm start`; default http://127.0.0.1:8787). Signs up a fresh user, creates an API key and a knowledge
// base, indexes the Cranfield collection (../shared/data/cranfield: 1,400 aeronautics abstracts,
// 225 queries, graded judgements) as one text file per document, then runs every query in keyword,
// vector and hybrid mode and prints nDCG@10 and Recall@100 for each.
//
// Relevance codes (cranqrel.readme): 1 complete answer ... 4 minimum interest; -1 (or 5) none.
// Gain = 5 - code for codes 1..4, else 0; Recall@100 counts codes 1..4 as relevant. Query numbers
// in cranqrel are the queries' ordinal positions in cran.qry (its .I ids skip numbers).
//
// Options: --data=DIR, --concurrency=N (default 4), --chunk-size=N (default 400),
// --hybrid=rrf|weighted, --alpha=A (weighted hybrid only), --keep (keep the knowledge base and
// print how to reuse it), --kb=ID --key=KEY (query an already indexed one; ids map by cran_id),
// --no-prf (skip the pseudo-relevance-feedback rows: `expand_query` in keyword and hybrid mode,
// which need no model connection).
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { existsSync } from "node:fs";
import { loadCranfield, ndcgAt, recallAt } from "./cranfield.mjs";
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
// The collection sits in the shared data folder beside the checkout (../shared/data) or beside
// the folder of worktrees (../../shared/data): the first that exists is the default.
const dataDir = args.get("data") ?? [join(root, "../shared/data/cranfield"), join(root, "../../shared/data/cranfield")].find((dir) => existsSync(dir)) ?? join(root, "../shared/data/cranfield");
await requireLoom(base, "eval:retrieval");
const concurrency = Number(args.get("concurrency") ?? 4);
const chunkSize = Number(args.get("chunk-size") ?? 400);
const hybridConfig = args.has("hybrid") ? { fusion_method: args.get("hybrid"), ...(args.has("alpha") ? { alpha: Number(args.get("alpha")) } : {}) } : undefined;

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

async function main() {
  const { docs, queries, qrels } = loadCranfield(dataDir);

  const reuse = args.has("kb") && args.has("key");
  const user = `eval${Date.now().toString(36)}`;
  let key = args.get("key");
  let kb = args.get("kb");
  if (!reuse) {
    const signup = await api("/auth/signup", { method: "POST", body: { email: `${user}@example.com`, password: "evaluation-password", username: user, organization: `${user}-org` } });
    key = (await api("/auth/api-keys", { method: "POST", token: signup.access_token, body: { name: "eval-retrieval" } })).key;
    kb = (await api("/v1/knowledge-base", { method: "POST", token: key, body: { name: "cranfield", chunk_size: chunkSize } })).id;
  }

  const started = Date.now();
  const docByLoomId = new Map();
  await pool(reuse ? [] : docs, concurrency, async (doc) => {
    const text = `${doc.title}\n\n${doc.body}`;
    const result = await api(`/v1/knowledge-base/${kb}/index`, {
      method: "POST",
      token: key,
      body: { file_data: { file: { type: "file", raw_bytes: Buffer.from(text).toString("base64"), metadata: { name: `cran-${doc.id}.txt`, mime_type: "text/plain" } }, custom_metadata: { cran_id: doc.id } } },
    });
    docByLoomId.set(result.document_ids[0], doc.id);
  });
  const indexSeconds = (Date.now() - started) / 1000;
  if (!reuse) console.log(`indexed ${docs.length} documents in ${indexSeconds.toFixed(1)} s (${base}, knowledge base ${kb})`);

  const modes = [
    ["keyword", { retrieval_config: { search_mode: "keyword" } }],
    ["vector", { retrieval_config: { search_mode: "vector" } }],
    ["hybrid", { retrieval_config: { search_mode: "hybrid" }, ...(hybridConfig ? { hybrid_search_config: hybridConfig } : {}) }],
  ];
  // The offline query options: pseudo-relevance feedback runs with no model connection.
  if (!args.has("no-prf")) {
    modes.push(["keyword+prf", { retrieval_config: { search_mode: "keyword" }, expand_query: true }]);
    modes.push(["hybrid+prf", { retrieval_config: { search_mode: "hybrid" }, ...(hybridConfig ? { hybrid_search_config: hybridConfig } : {}), expand_query: true }]);
  }
  const rows = [];
  for (const [mode, config] of modes) {
    let ndcg = 0;
    let recall = 0;
    let judged = 0;
    const t0 = Date.now();
    await pool(queries, concurrency, async (q) => {
      const gains = qrels.get(q.number);
      if (!gains) return;
      const res = await api(`/v1/knowledge-base/${kb}/query`, { method: "POST", token: key, body: { queries: [q.text], search_metadata: { top_k: 100 }, config: { ...config, retrieval_unit: "documents" } } });
      const ranked = res.result.documents.map((d) => docByLoomId.get(d.document_id) ?? String(d.metadata.cran_id));
      ndcg += ndcgAt(ranked, gains, 10);
      recall += recallAt(ranked, gains, 100);
      judged++;
    });
    rows.push({ mode, ndcg: ndcg / judged, recall: recall / judged, queries: judged, ms: (Date.now() - t0) / judged });
  }
  console.log("\nmode         nDCG@10  Recall@100  (queries, mean ms/query)");
  for (const r of rows) console.log(`${r.mode.padEnd(12)} ${r.ndcg.toFixed(4)}   ${r.recall.toFixed(4)}      (${r.queries}, ${r.ms.toFixed(1)})`);
  for (const [plain, prf] of [["keyword", "keyword+prf"], ["hybrid", "hybrid+prf"]]) {
    const a = rows.find((r) => r.mode === plain);
    const b = rows.find((r) => r.mode === prf);
    if (a && b) console.log(`expand_query (PRF) in ${plain} mode: nDCG@10 ${b.ndcg >= a.ndcg ? "+" : ""}${(b.ndcg - a.ndcg).toFixed(4)}, Recall@100 ${b.recall >= a.recall ? "+" : ""}${(b.recall - a.recall).toFixed(4)} (${b.ndcg >= a.ndcg ? "helps" : "hurts"})`);
  }
  const keyword = rows.find((r) => r.mode === "keyword");
  const hybrid = rows.find((r) => r.mode === "hybrid");
  if (hybrid.ndcg < keyword.ndcg) {
    console.log(`\nhybrid nDCG@10 ${hybrid.ndcg.toFixed(4)} is below keyword ${keyword.ndcg.toFixed(4)}`);
    process.exitCode = 1;
  } else console.log("\nhybrid is not worse than keyword alone");
  if (args.has("keep")) console.log(`kept: --kb=${kb} --key=${key}`);
  else await api(`/v1/knowledge-base/${kb}`, { method: "DELETE", token: key });
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
