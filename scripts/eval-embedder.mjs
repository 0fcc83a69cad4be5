// `npm run eval:embedder`: offline, vector-only retrieval quality of Loom's static embedder on the
// Cranfield collection (../shared/data/cranfield: 1,400 aeronautics abstracts, 225 queries, graded
// judgements). Embeds every document (title + abstract) and query with exactly the code the Worker
// runs (src/providers/static-embedder-core.ts, loaded through Node's type stripping), ranks by
// cosine similarity and prints nDCG@10 and Recall@100.
//
// Relevance codes (cranqrel.readme): 1 complete answer ... 4 minimum interest; -1 (or 5) no interest.
// Gain = 5 - code for codes 1..4 and 0 otherwise; Recall@100 counts codes 1..4 as relevant.
// Query numbers in cranqrel are the queries' ordinal positions in cran.qry (its .I ids skip numbers).
//
// Options: --table=PATH (default src/providers/generated/static-use.bin), --sif=A (override the
// table's SIF constant; 0 = plain mean), --data=DIR.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseStaticTable, StaticEmbeddingModel } from "../src/providers/static-embedder-core.ts";
import { loadCranfield, ndcgAt, recallAt } from "./cranfield.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [key, value] = arg.replace(/^--/, "").split("=");
    return [key, value ?? "true"];
  }),
);
const tablePath = args.get("table") ?? join(root, "src/providers/generated/static-use.bin");
const dataDir = args.get("data") ?? join(root, "../shared/data/cranfield");
const sifA = args.has("sif") ? Number(args.get("sif")) : undefined;
const piecePenalty = args.has("penalty") ? Number(args.get("penalty")) : undefined;

const { docs: collection, queries, qrels } = loadCranfield(dataDir);
const docs = collection.map((doc) => ({ id: doc.id, text: `${doc.title}\n${doc.body}`.trim() }));

const started = Date.now();
const model = new StaticEmbeddingModel(parseStaticTable(readFileSync(tablePath)), { sifA, piecePenalty });
const D = model.dimensions;
const docVectors = docs.map((doc) => model.embed(doc.text));
const embedMs = Date.now() - started;
const pieceCount = docs.reduce((sum, doc) => sum + model.tokenize(doc.text).length, 0);

let ndcgSum = 0;
let recallSum = 0;
let judged = 0;
for (const query of queries) {
  const judgements = qrels.get(query.number);
  if (!judgements) continue;
  if (![...judgements.values()].some((g) => g > 0)) continue;
  judged++;
  const q = model.embed(query.text);
  const scored = docVectors.map((v, i) => {
    let s = 0;
    for (let d = 0; d < D; d++) s += v[d] * q[d];
    return { id: docs[i].id, s };
  });
  scored.sort((x, y) => y.s - x.s || Number(x.id) - Number(y.id));
  const ranked = scored.map((x) => x.id);
  ndcgSum += ndcgAt(ranked, judgements, 10);
  recallSum += recallAt(ranked, judgements, 100);
}

console.log(`table: ${tablePath.replace(root, "")} (${D} dims${sifA === undefined ? "" : `, sif=${sifA}`})`);
console.log(
  `docs: ${docs.length} (${pieceCount} pieces), judged queries: ${judged}, embed all docs (cold cache): ${embedMs} ms = ${Math.round((docs.length * 1000) / embedMs)} docs/s`,
);
console.log(`nDCG@10    ${(ndcgSum / judged).toFixed(4)}`);
console.log(`Recall@100 ${(recallSum / judged).toFixed(4)}`);
