/**
 * Does pseudo-relevance feedback help keyword retrieval on Cranfield? Ranks the 1400 abstracts for
 * the 225 queries with BM25, then with BM25 over the RM3-expanded query built by
 * `src/providers/query-expansion.ts`, and prints MAP, nDCG@10, P@10 and Recall@100 for both.
 * Run: `npm run eval:prf` (bundles this file with esbuild, then runs it on Node 22).
 */
import { readFileSync } from "node:fs";
import { expandQuery, type ExpansionOptions } from "../src/providers/query-expansion";
import { contentTerms } from "../src/providers/text";
import { parseStaticTable, StaticEmbeddingModel } from "../src/providers/static-embedder-core";

const DIR = process.env.CRANFIELD_DIR ?? "/work/shared/data/cranfield";

function records(file: string): { id: number; text: string }[] {
  const raw = readFileSync(`${DIR}/${file}`, "utf8");
  return raw
    .split(/^\.I /m)
    .slice(1)
    .map((block) => {
      const id = Number(block.slice(0, block.indexOf("\n")).trim());
      const w = block.split(/^\.W\s*$/m)[1] ?? "";
      const title = (block.split(/^\.T\s*$/m)[1] ?? "").split(/^\.[A-Z]\s*$/m)[0] ?? "";
      return { id, text: `${file.startsWith("cran.all") ? title : ""} ${w}`.replace(/\s+/g, " ").trim() };
    });
}

const docs = records("cran.all.1400");
const queries = records("cran.qry").map((q, i) => ({ ...q, id: i + 1 })); // qrels number queries 1..225 in order
const qrels = new Map<number, Map<number, number>>();
for (const line of readFileSync(`${DIR}/cranqrel`, "utf8").split("\n")) {
  const [q, d, r] = line.trim().split(/\s+/).map(Number);
  if (!q || !d || r === undefined || r < 1 || r > 4) continue; // -1 and 5 mark non-relevant
  const map = qrels.get(q) ?? new Map<number, number>();
  map.set(d, 5 - r); // code 1 (complete answer) -> gain 4 ... code 4 -> gain 1, as eval:embedder
  qrels.set(q, map);
}

// BM25 index.
const K1 = 1.2;
const B = 0.75;
const docTerms = docs.map((d) => contentTerms(d.text));
const avgLen = docTerms.reduce((a, t) => a + t.length, 0) / docTerms.length;
const postings = new Map<string, Map<number, number>>();
docTerms.forEach((terms, i) => {
  for (const term of terms) {
    const p = postings.get(term) ?? new Map<number, number>();
    p.set(i, (p.get(i) ?? 0) + 1);
    postings.set(term, p);
  }
});
const df = (term: string): number => postings.get(term)?.size ?? 0;

function bm25(weightedTerms: Map<string, number>): { index: number; score: number }[] {
  const scores = new Map<number, number>();
  for (const [term, qw] of weightedTerms) {
    const p = postings.get(term);
    if (!p) continue;
    const idf = Math.log(1 + (docs.length - p.size + 0.5) / (p.size + 0.5));
    for (const [i, tf] of p) {
      const len = docTerms[i]?.length ?? 0;
      scores.set(i, (scores.get(i) ?? 0) + qw * idf * ((tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * len) / avgLen))));
    }
  }
  return [...scores.entries()].map(([index, score]) => ({ index, score })).sort((a, b) => b.score - a.score);
}

function termsOf(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const t of contentTerms(text)) m.set(t, (m.get(t) ?? 0) + 1);
  return m;
}

interface Metrics {
  map: number;
  ndcg10: number;
  p10: number;
  r100: number;
}

function evaluate(ranking: number[], rel: Map<number, number>): Metrics {
  let hits = 0;
  let ap = 0;
  let dcg = 0;
  ranking.slice(0, 1000).forEach((docId, i) => {
    const gain = rel.get(docId) ?? 0;
    if (gain > 0) {
      hits++;
      ap += hits / (i + 1);
    }
    if (i < 10) dcg += gain / Math.log2(i + 2);
  });
  const ideal = [...rel.values()]
    .sort((a, b) => b - a)
    .slice(0, 10)
    .reduce((a, g, i) => a + g / Math.log2(i + 2), 0);
  return {
    map: rel.size ? ap / rel.size : 0,
    ndcg10: ideal ? dcg / ideal : 0,
    p10: ranking.slice(0, 10).filter((d) => (rel.get(d) ?? 0) > 0).length / 10,
    r100: rel.size ? ranking.slice(0, 100).filter((d) => (rel.get(d) ?? 0) > 0).length / rel.size : 0,
  };
}

type Mode = { name: string; run: (query: string) => number[] };

function prfMode(name: string, options: ExpansionOptions, weightedQuery: boolean): Mode {
  return {
    name,
    run: (query) => {
      const first = bm25(termsOf(query));
      const feedback = first
        .slice(0, options.feedbackDocs ?? 5)
        .map((r) => ({ text: docs[r.index]?.text ?? "", score: r.score }));
      const expansion = expandQuery(query, feedback, {
        ...options,
        collection: { documentCount: docs.length, documentFrequency: df },
      });
      // Weighted: the RM3 weights as query-term weights. Unweighted: the expanded query string, as a plain keyword search sees it.
      const q = weightedQuery
        ? new Map(
            expansion.weighted.slice(0, termsOf(query).size + (options.terms ?? 8)).map((w) => [w.term, w.weight]),
          )
        : termsOf(expansion.query);
      return bm25(q).map((r) => docs[r.index]?.id ?? 0);
    },
  };
}

const modes: Mode[] = [
  { name: "bm25", run: (q) => bm25(termsOf(q)).map((r) => docs[r.index]?.id ?? 0) },
  prfMode("bm25+prf (string, k=5, 8 terms)", { feedbackDocs: 5, terms: 8 }, false),
  prfMode("bm25+prf (string, k=3, 5 terms)", { feedbackDocs: 3, terms: 5 }, false),
  prfMode("bm25+rm3 (weighted, k=5, 8 terms, λ=0.6)", { feedbackDocs: 5, terms: 8, originalWeight: 0.6 }, true),
  prfMode("bm25+rm3 (weighted, k=10, 10 terms, λ=0.7)", { feedbackDocs: 10, terms: 10, originalWeight: 0.7 }, true),
];

// Hybrid, as a knowledge base runs it by default: the static embedder's cosine ranking and BM25,
// fused by reciprocal rank fusion (k = 60). With expand_query the knowledge base runs the original
// and the PRF-expanded query (feedback: the keyword index's top 5) and fuses the two lists by RRF.
const TABLE = process.env.STATIC_TABLE ?? "src/providers/generated/static-use.bin";
let embed: ((text: string) => Float32Array) | undefined;
try {
  const model = new StaticEmbeddingModel(parseStaticTable(readFileSync(TABLE)));
  embed = (text) => Float32Array.from(model.embed(text));
} catch {
  console.log(`(no static embedding table at ${TABLE}: hybrid modes skipped; run npm install to build it)`);
}

function rrf(lists: number[][]): number[] {
  const scores = new Map<number, number>();
  for (const list of lists) list.forEach((id, rank) => scores.set(id, (scores.get(id) ?? 0) + 1 / (60 + rank + 1)));
  return [...scores.entries()].sort((a, b) => b[1] - a[1]).map(([id]) => id);
}

if (embed) {
  const vectors = docs.map((d) => embed?.(d.text) ?? new Float32Array());
  const vectorRank = (query: string): number[] => {
    const q = embed?.(query) ?? new Float32Array();
    return vectors
      .map((v, i) => {
        let s = 0;
        for (let d = 0; d < q.length; d++) s += (v[d] ?? 0) * (q[d] ?? 0);
        return { id: docs[i]?.id ?? 0, s };
      })
      .sort((a, b) => b.s - a.s)
      .slice(0, 1000)
      .map((r) => r.id);
  };
  const keywordRank = (query: string): number[] =>
    bm25(termsOf(query))
      .slice(0, 1000)
      .map((r) => docs[r.index]?.id ?? 0);
  const hybrid = (query: string): number[] => rrf([vectorRank(query), keywordRank(query)]);
  const expanded = (query: string): string => {
    const first = bm25(termsOf(query))
      .slice(0, 5)
      .map((r) => ({ text: docs[r.index]?.text ?? "", score: r.score }));
    return expandQuery(query, first).query;
  };
  modes.push(
    {
      name: "keyword, 2 queries fused (original + PRF), as expand_query runs",
      run: (q) => rrf([keywordRank(q), keywordRank(expanded(q))]),
    },
    { name: "vector (static embedder)", run: vectorRank },
    { name: "hybrid (vector + bm25, RRF) — the knowledge base default", run: hybrid },
    { name: "hybrid + expand_query (original + PRF, RRF)", run: (q) => rrf([hybrid(q), hybrid(expanded(q))]) },
  );
}

const evaluated = queries.filter((q) => qrels.has(q.id));
console.log(`Cranfield: ${docs.length} documents, ${evaluated.length} judged queries`);
console.log("| mode | MAP | nDCG@10 | P@10 | Recall@100 | ms/query |");
console.log("|---|---|---|---|---|---|");
for (const mode of modes) {
  const sum: Metrics = { map: 0, ndcg10: 0, p10: 0, r100: 0 };
  const start = performance.now();
  for (const q of evaluated) {
    const m = evaluate(mode.run(q.text), qrels.get(q.id) ?? new Map());
    sum.map += m.map;
    sum.ndcg10 += m.ndcg10;
    sum.p10 += m.p10;
    sum.r100 += m.r100;
  }
  const ms = (performance.now() - start) / evaluated.length;
  const n = evaluated.length;
  console.log(
    `| ${mode.name} | ${(sum.map / n).toFixed(4)} | ${(sum.ndcg10 / n).toFixed(4)} | ${(sum.p10 / n).toFixed(4)} | ${(sum.r100 / n).toFixed(4)} | ${ms.toFixed(2)} |`,
  );
}
