/**
 * `npm run eval:offline [-- options]`: a fast screen of the default query's ranking for parameter
 * sweeps, in Node, without a server. It rebuilds what the index object does for one query
 * (chunk-retriever.ts: BM25 with query-term counts, RM3 feedback from BM25's own first pass, the
 * title boost, the static embedder's vector half, Rocchio over the candidates, z-score fusion)
 * from the Worker's own pure functions; only BM25 itself and that orchestration are written here.
 * Each document is one chunk (on the server a few abstracts longer than chunk_size split), so the
 * figures come within about 0.005 of `npm run eval:retrieval` (BENCHMARKS.md, fourth pass on
 * quality), not to the digit: a screen for ideas, never the figures a change is judged by.
 *
 * Options: --collections=cranfield,cisi --modes=default,keyword,vector --data=DIR and, to sweep,
 * --k1=1.2 --b=0.6 --alpha=0.2 --feedback-docs=5 --title-weight=0.5 --rocchio-docs=5 (the
 * defaults are the Worker's). Run: bundled by esbuild, then Node 22 (see package.json).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCollections } from "./collections.mjs";
import { ndcgAt, recallAt } from "./cranfield.mjs";
import { embeddingText, queryTermCounts, selectTerms } from "../src/features/knowledge-bases/index/keyword-query";
import { expandWithFeedback, FEEDBACK, feedbackWords } from "../src/features/knowledge-bases/index/keyword-feedback";
import { boostTitles, leadingTitle, TITLE_BOOST } from "../src/features/knowledge-bases/index/title-boost";
import { rocchio, VECTOR_FEEDBACK } from "../src/features/knowledge-bases/index/vector-feedback";
import { weightedFusion, type Scored } from "../src/features/knowledge-bases/index/hybrid-search";
import { porterStem } from "../src/features/knowledge-bases/index/porter-stemmer";
import { bm25Idf } from "../src/features/knowledge-bases/index/keyword-scorer";
import { BM25_B, BM25_K1 } from "../src/features/knowledge-bases/index/chunk-lengths";
import { parseStaticTable, StaticEmbeddingModel } from "../src/providers/static-embedder-core";

interface Collection {
  name: string;
  docs: { id: string; title: string; body: string }[];
  queries: { number: number; text: string }[];
  qrels: Map<number, Map<string, number>>;
}
type Mode = "default" | "keyword" | "vector";

const root = fileURLToPath(new URL("..", import.meta.url));
const args = new Map(
  process.argv.slice(2).map((a): [string, string] => {
    const [k, v] = a.replace(/^--/, "").split("=");
    return [k, v ?? "true"];
  }),
);
const num = (name: string, fallback: number): number => (args.has(name) ? Number(args.get(name)) : fallback);
const K1 = num("k1", BM25_K1);
const B = num("b", BM25_B);
const ALPHA = num("alpha", 0.2);
const FEEDBACK_DOCS = num("feedback-docs", FEEDBACK.docs);
const TITLE_WEIGHT = num("title-weight", TITLE_BOOST.weight);
const ROCCHIO_DOCS = num("rocchio-docs", VECTOR_FEEDBACK.docs);
/** eval:retrieval asks top_k 100 of `retrieval_unit: documents`: the candidate depth is then 1,000 (query.service.ts). */
const DEPTH = 1000;

const model = new StaticEmbeddingModel(
  parseStaticTable(readFileSync(join(root, "src/providers/generated/static-use.bin"))),
);

/** FTS5's unicode61 + porter: letter and digit runs, case and diacritics folded, each stemmed. */
function ftsStems(text: string): string[] {
  const folded = text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
  return [...folded.matchAll(/[\p{L}\p{N}]+/gu)].map((m) => porterStem(m[0]) ?? m[0]);
}

/** KeywordScorer.weightedStems: a stem weighs what the words that give it weigh together. */
function weightedStems(words: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [word, weight] of words) for (const stem of ftsStems(word)) out.set(stem, (out.get(stem) ?? 0) + weight);
  return out;
}

class Index {
  readonly ids: string[];
  readonly texts: string[];
  readonly postings = new Map<string, { rows: number[]; tfs: number[] }>();
  readonly norm: number[];
  readonly vectors: Float32Array[];
  readonly titles: (string[] | undefined)[];

  constructor(docs: Collection["docs"]) {
    // As eval:retrieval indexes them: title, blank line, abstract; documents without text left out.
    const kept = docs.filter((d) => `${d.title}${d.body}`.trim() !== "");
    this.ids = kept.map((d) => d.id);
    this.texts = kept.map((d) => `${d.title}\n\n${d.body}`);
    const lengths = this.texts.map((text, row) => {
      const stems = ftsStems(text);
      const counts = new Map<string, number>();
      for (const s of stems) counts.set(s, (counts.get(s) ?? 0) + 1);
      for (const [s, tf] of counts) {
        const list = this.postings.get(s) ?? { rows: [], tfs: [] };
        list.rows.push(row);
        list.tfs.push(tf);
        this.postings.set(s, list);
      }
      return stems.length;
    });
    const average = lengths.reduce((a, n) => a + n, 0) / lengths.length;
    this.norm = lengths.map((n) => K1 * (1 - B + (B * n) / average));
    this.vectors = this.texts.map((text) => model.embed(text));
    this.titles = this.texts.map((text) => {
      const title = leadingTitle(text, 0);
      return title ? [...weightedStems(feedbackWords(title)).keys()] : undefined;
    });
  }

  get size(): number {
    return this.ids.length;
  }

  df(stem: string): number {
    return this.postings.get(stem)?.rows.length ?? 0;
  }

  /** KeywordScorer.scoreStems: query-weighted BM25 with FTS5's idf. */
  bm25(stems: Map<string, number>): Scored<number>[] {
    const scores = new Map<number, number>();
    for (const [stem, weight] of stems) {
      const list = this.postings.get(stem);
      if (!list || !(weight > 0)) continue;
      const w = bm25Idf(this.size, list.rows.length) * weight * (K1 + 1);
      list.rows.forEach((row, i) => {
        const tf = list.tfs[i];
        scores.set(row, (scores.get(row) ?? 0) + (w * tf) / (tf + this.norm[row]));
      });
    }
    return top(scores);
  }

  nearest(vector: ArrayLike<number>, among?: Set<number>): Scored<number>[] {
    const scores = new Map<number, number>();
    this.vectors.forEach((v, row) => {
      if (among && !among.has(row)) return;
      let dot = 0;
      for (let i = 0; i < v.length; i++) dot += v[i] * vector[i];
      scores.set(row, dot);
    });
    return top(scores);
  }

  /** ChunkRetriever.boostTitles, at --title-weight (the query's weights scaled to it). */
  boostTitles(hits: Scored<number>[], query: Map<string, number>): Scored<number>[] {
    const scaled = new Map([...query].map(([s, w]): [string, number] => [s, (w * TITLE_WEIGHT) / TITLE_BOOST.weight]));
    return boostTitles(
      hits,
      (row) => this.titles[row],
      scaled,
      (s) => bm25Idf(this.size, this.df(s)),
    );
  }
}

function top(scores: Map<number, number>): Scored<number>[] {
  return [...scores]
    .map(([id, score]) => ({ id, score }))
    .sort((a, b) => b.score - a.score || a.id - b.id)
    .slice(0, DEPTH);
}

/** ChunkRetriever.keywordRows: BM25, RM3 feedback from its own first pass, the title boost. */
function keywordRows(index: Index, text: string): Scored<number>[] {
  const counts = queryTermCounts(text);
  const chosen = selectTerms([...counts.keys()], (t) => index.df(ftsStems(t)[0] ?? ""));
  if (chosen.length === 0) return [];
  const query = weightedStems(new Map(chosen.map((t) => [t, counts.get(t) ?? 1])));
  const hits = index.bm25(query);
  if (hits.length < 2) return index.boostTitles(hits, query);
  const docs = hits.slice(0, FEEDBACK_DOCS).map((h) => ({
    stems: weightedStems(feedbackWords(index.texts[h.id])),
    score: h.score,
  }));
  const expanded = expandWithFeedback(query, docs, (s) => Math.log(1 + index.size / (1 + index.df(s))));
  return index.boostTitles(index.bm25(expanded), expanded);
}

/** ChunkRetriever.retrieve for one query of the default weighted hybrid (or one half alone). */
function rank(index: Index, text: string, mode: Mode): Scored<number>[] {
  const queryVector = model.embed(embeddingText(text));
  const keyword = mode === "vector" ? [] : keywordRows(index, text);
  if (mode === "keyword") return keyword;
  let vector = index.nearest(queryVector);
  if (mode === "vector") return vector;
  if (vector.length && keyword.length) {
    const feedback = weightedFusion(vector, keyword, ALPHA)
      .slice(0, ROCCHIO_DOCS)
      .map((t) => index.vectors[t.id]);
    vector = index.nearest(rocchio(queryVector, feedback), new Set([...vector, ...keyword].map((c) => c.id)));
  }
  return weightedFusion(vector, keyword, ALPHA);
}

const dataDir =
  args.get("data") ??
  [join(root, "../shared/data"), join(root, "../../shared/data")].find((d) => existsSync(d)) ??
  join(root, "../shared/data");
const collections = loadCollections(dataDir, (args.get("collections") ?? "cranfield,cisi").split(",")) as Collection[];
const modes = (args.get("modes") ?? "default,keyword,vector").split(",") as Mode[];
console.log(
  `k1 ${K1}, b ${B}, alpha ${ALPHA}, feedback docs ${FEEDBACK_DOCS}, title weight ${TITLE_WEIGHT}, Rocchio docs ${ROCCHIO_DOCS}`,
);
for (const collection of collections) {
  const index = new Index(collection.docs);
  for (const mode of modes) {
    let ndcg = 0;
    let recall = 0;
    let n = 0;
    for (const query of collection.queries) {
      const gains = collection.qrels.get(query.number);
      if (!gains) continue;
      const ranked = rank(index, query.text, mode).map((s) => index.ids[s.id]);
      ndcg += ndcgAt(ranked, gains, 10);
      recall += recallAt(ranked, gains, 100);
      n++;
    }
    console.log(
      `${collection.name.padEnd(10)} ${mode.padEnd(8)} nDCG@10 ${(ndcg / n).toFixed(4)}  Recall@100 ${(recall / n).toFixed(4)}  (${n} q)`,
    );
  }
}
