// Knowledge-base benchmark: indexing throughput (chunks/s) and hybrid top-10 query latency
// (p50/p99, end to end over HTTP: auth, D1 lookup, embedding, the index Durable Object) at 1k,
// 10k and 100k chunks in one knowledge base. Text comes from the Cranfield abstracts
// (../shared/data/cranfield): words drawn in their corpus frequencies, so term statistics are
// those of real technical prose.
// After the last level, the first query after the index object has been idle long enough to be
// evicted (its memory gone, reloaded from its SQLite) is timed --cold times (default 3; 0 skips).
// Then --concurrency (default 8; 0 skips) queries in flight measure one knowledge base's throughput.
// Options: --levels=1000,10000,100000  --queries=200  --chunk-size=48  --doc-chunks=2000  --concurrency=8  --cold=3  --keep
//          --kb=ID --key=KEY (a knowledge base kept by an earlier --keep run: no indexing, its one level
//          is what it holds)  --d1-awake=3 (during the --cold idle, a D1-only request every 3 s, so only
//          the index object is evicted: locally D1 is an object too and is evicted with it otherwise)
import { percentile } from "../latency.mjs";
import { apiClient, syntheticCranfield } from "../bench-corpus.mjs";

export async function run({ base, args }) {
  const levels = (args.get("levels") ?? "1000,10000,100000").split(",").map(Number);
  const queryCount = Number(args.get("queries") ?? 200);
  const chunkSize = Number(args.get("chunk-size") ?? 48);
  const docChunks = Number(args.get("doc-chunks") ?? 2000);

  const api = apiClient(base);

  const { queries, makeDocument } = syntheticCranfield();

  const reuse = args.has("kb") && args.has("key");
  const { kb, key } = reuse ? { kb: args.get("kb"), key: args.get("key") } : await newKnowledgeBase(api, chunkSize);

  let total = 0;
  const rows = [];
  if (reuse) {
    const { documents } = await api(`/v1/knowledge-base/${kb}/documents`, { token: key });
    total = documents.reduce((n, d) => n + d.chunkCount, 0);
    rows.push({ chunks: total, newChunks: 0, indexSeconds: 0, chunksPerSecond: 0, p50: 0, p99: 0 });
  }
  for (const level of reuse ? [] : levels) {
    const t0 = performance.now();
    const added = [];
    while (total < level) {
      const want = Math.min(docChunks, level - total);
      const text = makeDocument(want);
      const res = await api(`/v1/knowledge-base/${kb}/index`, {
        method: "POST",
        token: key,
        body: {
          file_data: {
            file: {
              type: "file",
              raw_bytes: Buffer.from(text).toString("base64"),
              metadata: { name: `bench-${total}.txt`, mime_type: "text/plain" },
            },
            custom_metadata: { level },
          },
        },
      });
      added.push(res.document_ids[0]);
      total += want;
    }
    // Large documents finish from the Durable Object's alarm: wait until every one is ready.
    let chunks = 0;
    for (;;) {
      const { documents } = await api(`/v1/knowledge-base/${kb}/documents`, { token: key });
      const mine = documents.filter((d) => added.includes(d._id));
      const failed = mine.find((d) => d.status === "failed");
      if (failed) throw new Error(`document failed: ${failed.error}`);
      if (mine.every((d) => d.status === "ready")) {
        chunks = documents.reduce((n, d) => n + d.chunkCount, 0);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const indexSeconds = (performance.now() - t0) / 1000;
    const newChunks = chunks - rows.reduce((n, r) => n + r.newChunks, 0);

    const latencies = [];
    for (let i = 0; i < Math.min(10, queryCount); i++)
      await api(`/v1/knowledge-base/${kb}/query`, {
        method: "POST",
        token: key,
        body: { queries: [queries[i % queries.length]], search_metadata: { top_k: 10 } },
      });
    for (let i = 0; i < queryCount; i++) {
      const q0 = performance.now();
      await api(`/v1/knowledge-base/${kb}/query`, {
        method: "POST",
        token: key,
        body: { queries: [queries[i % queries.length]], search_metadata: { top_k: 10 } },
      });
      latencies.push(performance.now() - q0);
    }
    latencies.sort((a, b) => a - b);
    const row = {
      chunks,
      newChunks,
      indexSeconds,
      chunksPerSecond: newChunks / indexSeconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
    };
    rows.push(row);
    console.log(
      `${String(chunks).padStart(7)} chunks | indexed ${newChunks} in ${indexSeconds.toFixed(1)} s = ${row.chunksPerSecond.toFixed(0)} chunks/s | hybrid top-10 p50 ${row.p50.toFixed(1)} ms, p99 ${row.p99.toFixed(1)} ms (${queryCount} queries)`,
    );
  }
  // Throughput at the last level: queries with --concurrency in flight (one knowledge base's index
  // object answers them one at a time, so this is that object's rate, plus HTTP in parallel).
  const concurrency = Number(args.get("concurrency") ?? 8);
  if (concurrency > 0) {
    const total = Math.max(queryCount, concurrency * 25);
    const times = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const i = next++;
          const q0 = performance.now();
          await api(`/v1/knowledge-base/${kb}/query`, {
            method: "POST",
            token: key,
            body: { queries: [queries[i % queries.length]], search_metadata: { top_k: 10 } },
          });
          times.push(performance.now() - q0);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    times.sort((a, b) => a - b);
    console.log(
      `${total} hybrid queries, ${concurrency} in flight, at ${rows[rows.length - 1].chunks} chunks: ${(total / seconds).toFixed(0)} queries/s, p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms`,
    );
  }

  // A Durable Object idle for ~10 s is evicted; its next query reloads vectors, lengths and cached postings.
  const coldRuns = Number(args.get("cold") ?? 3);
  const cold = [];
  const d1Awake = Number(args.get("d1-awake") ?? 0);
  for (let i = 0; i < coldRuns; i++) {
    const idleFrom = performance.now();
    while (d1Awake > 0 && performance.now() - idleFrom < 15_000 - d1Awake * 1000) {
      await new Promise((r) => setTimeout(r, d1Awake * 1000));
      await api("/v1/knowledge-bases", { token: key });
    }
    await new Promise((r) => setTimeout(r, Math.max(0, 15_000 - (performance.now() - idleFrom))));
    const q0 = performance.now();
    await api(`/v1/knowledge-base/${kb}/query`, {
      method: "POST",
      token: key,
      body: { queries: [queries[(i * 7) % queries.length]], search_metadata: { top_k: 10 } },
    });
    cold.push(performance.now() - q0);
  }
  if (coldRuns > 0)
    console.log(
      `first query after 15 s idle (object evicted) at ${total} chunks: ${cold.map((t) => `${t.toFixed(0)} ms`).join(", ")}`,
    );
  if (reuse || args.has("keep")) console.log(`kept knowledge base ${kb} (API key ${key}): --kb=${kb} --key=${key}`);
  else await api(`/v1/knowledge-base/${kb}`, { method: "DELETE", token: key });
  if (reuse) return rows;
  const last = rows[rows.length - 1];
  const indexing = rows.reduce((n, r) => n + r.newChunks, 0) / rows.reduce((n, r) => n + r.indexSeconds, 0);
  console.log(
    `targets at ${last.chunks} chunks: p50 < 25 ms ${last.p50 < 25 ? "met" : "MISSED"} (${last.p50.toFixed(1)}), p99 < 100 ms ${last.p99 < 100 ? "met" : "MISSED"} (${last.p99.toFixed(1)}), indexing > 500 chunks/s ${indexing > 500 ? "met" : "MISSED"} (${indexing.toFixed(0)})`,
  );
  return rows;
}

async function newKnowledgeBase(api, chunkSize) {
  const user = `bench${Date.now().toString(36)}`;
  const signup = await api("/auth/signup", {
    method: "POST",
    body: { email: `${user}@example.com`, password: "benchmark-password", username: user, organization: `${user}-org` },
  });
  const { key } = await api("/auth/api-keys", { method: "POST", token: signup.access_token, body: { name: "bench" } });
  const { id: kb } = await api("/v1/knowledge-base", {
    method: "POST",
    token: key,
    body: { name: "bench", chunk_size: chunkSize },
  });
  return { kb, key };
}
