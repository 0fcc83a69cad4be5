// Shared pieces of the knowledge-base bench sections (scripts/bench/knowledge-bases.mjs, scale.mjs,
// small-documents.mjs): a JSON client for Loom's API and the synthetic Cranfield corpus.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";

const root = fileURLToPath(new URL("..", import.meta.url));

/** A JSON call to Loom: throws with the status and body on anything but 2xx. */
export function apiClient(base) {
  return async function api(path, { method = "GET", body, token } = {}) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    const response = await fetch(`${base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(`${method} ${path} -> ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** A seeded linear congruential generator, so every run draws the same text. */
export function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * Cranfield's query texts, and documents of words drawn in the Cranfield abstracts' own
 * frequencies: a sentence is 20 words and a period (21 tokens), so with chunk_size 48 every chunk is
 * exactly two sentences and `makeDocument(n)` gives exactly n chunks.
 */
export function syntheticCranfield(seed = 42) {
  const corpus = readFileSync(join(root, "../shared/data/cranfield/cran.all.1400"), "utf8");
  const words = corpus.toLowerCase().match(/\b[a-z]{2,}\b/g);
  const queries = readFileSync(join(root, "../shared/data/cranfield/cran.qry"), "utf8")
    .split(/^\.I .*$/m)
    .map((q) =>
      q
        .replace(/^\s*\.W\s*/, "")
        .replace(/\s+/g, " ")
        .trim(),
    )
    .filter(Boolean);
  const random = rng(seed);
  const makeDocument = (chunks) => {
    const parts = [];
    for (let i = 0; i < chunks * 2; i++) {
      const sentence = [];
      for (let w = 0; w < 20; w++) sentence.push(words[Math.floor(random() * words.length)]);
      parts.push(`${sentence.join(" ")}.`);
    }
    return parts.join(" ");
  };
  return { queries, makeDocument };
}
