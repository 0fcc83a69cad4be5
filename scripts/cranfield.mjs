// The Cranfield test collection (../shared/data/cranfield) and the two measures the evaluation
// scripts report. Graded judgments: code 1 is the most relevant; gain = 5 - code for codes 1-4,
// 0 for -1 and 5 (see cranqrel.readme).
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** Splits a SMART-format file (".I n" records with ".X" fields) into records of fields. */
export function parseSmart(text) {
  const records = [];
  let current = null;
  let field = null;
  for (const line of text.split("\n")) {
    const marker = /^\.([A-Z])(?:\s+(\S+))?\s*$/.exec(line);
    if (marker && marker[1] === "I") {
      current = { id: marker[2], fields: {} };
      records.push(current);
      field = null;
    } else if (marker && current) {
      field = marker[1];
      current.fields[field] = "";
    } else if (current && field) {
      current.fields[field] += `${line}\n`;
    }
  }
  return records;
}

/**
 * Documents `{id, title, body}` (id as written in the collection), queries `{number, text}`
 * numbered 1.. in file order (the numbering cranqrel uses), and judgments: query number ->
 * Map(document id -> gain).
 */
export function loadCranfield(dataDir) {
  const docs = parseSmart(readFileSync(join(dataDir, "cran.all.1400"), "utf8")).map((r) => ({
    id: String(Number(r.id)),
    title: (r.fields.T ?? "").replace(/\s+/g, " ").trim(),
    body: (r.fields.W ?? "").trim(),
  }));
  const queries = parseSmart(readFileSync(join(dataDir, "cran.qry"), "utf8")).map((r, index) => ({
    number: index + 1,
    text: (r.fields.W ?? "").replace(/\s+/g, " ").trim(),
  }));
  const qrels = new Map();
  for (const line of readFileSync(join(dataDir, "cranqrel"), "utf8").split("\n")) {
    const [q, d, code] = line.trim().split(/\s+/).map(Number);
    if (!q || !d) continue;
    const gain = code >= 1 && code <= 4 ? 5 - code : 0;
    if (!qrels.has(q)) qrels.set(q, new Map());
    qrels.get(q).set(String(d), gain);
  }
  return { docs, queries, qrels };
}

/** nDCG@k of a ranked list of document ids against graded gains. */
export function ndcgAt(ranked, gains, k) {
  let dcg = 0;
  ranked.slice(0, k).forEach((doc, i) => (dcg += (gains.get(doc) ?? 0) / Math.log2(i + 2)));
  const ideal = [...gains.values()].sort((a, b) => b - a).slice(0, k);
  let idcg = 0;
  ideal.forEach((g, i) => (idcg += g / Math.log2(i + 2)));
  return idcg > 0 ? dcg / idcg : 0;
}

/** Recall@k: the share of the relevant documents (gain > 0) found in the top k. */
export function recallAt(ranked, gains, k) {
  const relevant = [...gains].filter(([, g]) => g > 0).map(([d]) => d);
  if (relevant.length === 0) return 0;
  const top = new Set(ranked.slice(0, k));
  return relevant.filter((d) => top.has(d)).length / relevant.length;
}
