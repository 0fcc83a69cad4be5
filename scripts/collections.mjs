// The test collections `npm run eval:retrieval` measures, all under one data folder
// (../shared/data): Cranfield (graded judgements, see cranfield.mjs) and CISI (binary judgements,
// long natural-language queries). Each loads as documents `{id, title, body}`, queries
// `{number, text}` and judgements: query number -> Map(document id -> gain).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { loadCranfield, parseSmart } from "./cranfield.mjs";

/** CISI: `.T` title and `.W` abstract (`.A` authors and `.X` citation links are not text); every pair in CISI.REL is relevant (gain 1). */
export function loadCisi(dataDir) {
  const docs = parseSmart(readFileSync(join(dataDir, "CISI.ALL"), "utf8")).map((r) => ({
    id: String(Number(r.id)),
    title: (r.fields.T ?? "").replace(/\s+/g, " ").trim(),
    body: (r.fields.W ?? "").trim(),
  }));
  // CISI.REL numbers queries by their .I id (consecutive from 1).
  const queries = parseSmart(readFileSync(join(dataDir, "CISI.QRY"), "utf8")).map((r) => ({
    number: Number(r.id),
    text: (r.fields.W ?? "").replace(/\s+/g, " ").trim(),
  }));
  const qrels = new Map();
  for (const line of readFileSync(join(dataDir, "CISI.REL"), "utf8").split("\n")) {
    const [q, d] = line.trim().split(/\s+/).map(Number);
    if (!q || !d) continue;
    if (!qrels.has(q)) qrels.set(q, new Map());
    qrels.get(q).set(String(d), 1);
  }
  return { docs, queries, qrels };
}

const loaders = { cranfield: loadCranfield, cisi: loadCisi };

/** The named collections found under `dataDir` (a folder per collection), in the order asked. */
export function loadCollections(dataDir, names) {
  return names.flatMap((name) => {
    const loader = loaders[name];
    if (!loader) throw new Error(`unknown collection "${name}" (known: ${Object.keys(loaders).join(", ")})`);
    const dir = join(dataDir, name);
    if (!existsSync(dir)) {
      console.log(`skipping ${name}: ${dir} not found`);
      return [];
    }
    return [{ name, ...loader(dir) }];
  });
}
