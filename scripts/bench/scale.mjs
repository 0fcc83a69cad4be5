// Scale benchmark (issue 18): one knowledge base grown to --chunks (default 100,000; 1,000,000 for
// the figure), timed at 100k on the way and at the end: indexing throughput, hybrid top-10
// p50/p99 one query at a time, then throughput with --in-flight queries at once (default 16).
// Text as in the knowledge-bases section (Cranfield words in their corpus frequencies).
// It prints the load average with every figure (the machine is shared), the knowledge base's
// shard/replica fields if its record has any (a sharded build), and with --server-pid=PID the
// CPU time the server process spent per query (robust to other load, unlike wall time).
// Past 200,000 chunks start the server with a larger limit:
//   npm start -- --port 8801 --no-rate-limits --var KB_MAX_CHUNKS=1000000
//   npm run bench -- scale --base=http://127.0.0.1:8801 --chunks=1000000 --in-flight=16
// Options: --chunks=100000  --in-flight=16  --queries=200  --doc-chunks=2000  --chunk-size=48
//          --settle=10 (seconds between indexing and timing, so background work after the last
//          write, such as the index reading its posting lists ahead, is done)  --server-pid=  --keep
//          --kb=ID --key=KEY (time queries on a knowledge base kept by an earlier --keep run, without
//          indexing: the same base measured against two builds, or before and after a change)
import { loadavg } from "node:os";
import { cpuSeconds, percentile } from "../latency.mjs";
import { apiClient, syntheticCranfield } from "../bench-corpus.mjs";

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

export async function run({ base, args }) {
  const target = Number(args.get("chunks") ?? 100_000);
  const inFlight = Number(args.get("in-flight") ?? 16);
  const queryCount = Number(args.get("queries") ?? 200);
  const docChunks = Number(args.get("doc-chunks") ?? 2000);
  const chunkSize = Number(args.get("chunk-size") ?? 48);
  const settle = Number(args.get("settle") ?? 10);
  const serverPid = args.get("server-pid");
  const levels = [...new Set([Math.min(100_000, target), target])];

  const api = apiClient(base);

  const { queries, makeDocument } = syntheticCranfield();
  if (args.has("kb")) return timeKept({ api, queries, args, queryCount, inFlight, serverPid });

  const user = `scale${Date.now().toString(36)}`;
  const signup = await api("/auth/signup", {
    method: "POST",
    body: { email: `${user}@example.com`, password: "benchmark-password", username: user, organization: `${user}-org` },
  });
  const { key } = await api("/auth/api-keys", { method: "POST", token: signup.access_token, body: { name: "scale" } });
  const { id: kb } = await api("/v1/knowledge-base", {
    method: "POST",
    token: key,
    body: { name: "scale", chunk_size: chunkSize },
  });
  const ask = asker(api, kb, key, queries);

  /** Shard and replica fields of the knowledge base's record, whatever a sharded build names them. */
  async function layout() {
    const record = await api(`/v1/knowledge-base?id=${kb}`, { token: key });
    const found = [];
    const walk = (value, path) => {
      if (value === null || typeof value !== "object") return;
      for (const [k, v] of Object.entries(value)) {
        if (/shard|replica/i.test(k)) found.push(`${path}${k}=${JSON.stringify(v)}`);
        else walk(v, `${path}${k}.`);
      }
    };
    walk(record, "");
    return found.length ? found.join(", ") : "no shard or replica fields (one index object)";
  }

  let total = 0;
  const results = [];
  for (const level of levels) {
    const t0 = performance.now();
    const loadBefore = load();
    const added = new Set();
    while (total < level) {
      const want = Math.min(docChunks, level - total);
      const res = await api(`/v1/knowledge-base/${kb}/index`, {
        method: "POST",
        token: key,
        body: {
          file_data: {
            file: {
              type: "file",
              raw_bytes: Buffer.from(makeDocument(want)).toString("base64"),
              metadata: { name: `scale-${total}.txt`, mime_type: "text/plain" },
            },
          },
        },
      });
      added.add(res.document_ids[0]);
      total += want;
    }
    // Large documents finish from the index objects' alarms: wait until every one is ready.
    let chunks = 0;
    for (;;) {
      const { documents } = await api(`/v1/knowledge-base/${kb}/documents`, { token: key });
      const mine = documents.filter((d) => added.has(d._id));
      const failed = mine.find((d) => d.status === "failed");
      if (failed) throw new Error(`document failed: ${failed.error}`);
      if (mine.every((d) => d.status === "ready")) {
        chunks = documents.reduce((n, d) => n + d.chunkCount, 0);
        break;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    const indexSeconds = (performance.now() - t0) / 1000;
    const newChunks = chunks - results.reduce((n, r) => n + r.newChunks, 0);
    console.log(
      `${chunks} chunks: indexed ${newChunks} in ${indexSeconds.toFixed(1)} s = ${(newChunks / indexSeconds).toFixed(0)} chunks/s (load ${loadBefore} -> ${load()}); ${await layout()}`,
    );
    await new Promise((r) => setTimeout(r, settle * 1000));
    // Shards split from the alarms once a write settles: the layout the queries below run on.
    console.log(`${chunks} chunks: after ${settle} s: ${await layout()}`);

    const timed = await timeQueries({ ask, chunks, queryCount, inFlight, serverPid });
    results.push({ chunks, newChunks, chunksPerSecond: newChunks / indexSeconds, ...timed });
  }
  if (args.has("keep")) console.log(`kept knowledge base ${kb} (API key ${key}): --kb=${kb} --key=${key}`);
  else await api(`/v1/knowledge-base/${kb}`, { method: "DELETE", token: key });
  return results;
}

function asker(api, kb, key, queries) {
  return (i) =>
    api(`/v1/knowledge-base/${kb}/query`, {
      method: "POST",
      token: key,
      body: { queries: [queries[i % queries.length]], search_metadata: { top_k: 10 } },
    });
}

async function timeKept({ api, queries, args, queryCount, inFlight, serverPid }) {
  const kb = args.get("kb");
  const key = args.get("key");
  const { documents } = await api(`/v1/knowledge-base/${kb}/documents`, { token: key });
  const chunks = documents.reduce((n, d) => n + d.chunkCount, 0);
  return [
    { chunks, ...(await timeQueries({ ask: asker(api, kb, key, queries), chunks, queryCount, inFlight, serverPid })) },
  ];
}

/** p50/p99 one at a time (after 10 warm-up queries) with the server's CPU per query, then --in-flight at once. */
async function timeQueries({ ask, chunks, queryCount, inFlight, serverPid }) {
  for (let i = 0; i < 10; i++) await ask(i + 200);
  const cpu0 = cpuSeconds(serverPid);
  const loadQueries = load();
  const latencies = [];
  for (let i = 0; i < queryCount; i++) {
    const q0 = performance.now();
    await ask(i);
    latencies.push(performance.now() - q0);
  }
  const cpu1 = cpuSeconds(serverPid);
  latencies.sort((a, b) => a - b);
  const cpu =
    cpu0 !== null && cpu1 !== null ? `, server CPU ${((1000 * (cpu1 - cpu0)) / queryCount).toFixed(1)} ms/query` : "";
  console.log(
    `${chunks} chunks: hybrid top-10 one at a time p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms (${queryCount} queries${cpu}; load ${loadQueries} -> ${load()})`,
  );

  let throughput = null;
  if (inFlight > 0) {
    const n = Math.max(queryCount, inFlight * 25);
    const times = [];
    let next = 0;
    const loadBurst = load();
    const b0 = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < n) {
          const i = next++;
          const q0 = performance.now();
          await ask(i);
          times.push(performance.now() - q0);
        }
      }),
    );
    const seconds = (performance.now() - b0) / 1000;
    times.sort((a, b) => a - b);
    throughput = n / seconds;
    console.log(
      `${chunks} chunks: ${n} hybrid queries, ${inFlight} in flight: ${throughput.toFixed(0)} queries/s, p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms (load ${loadBurst} -> ${load()})`,
    );
  }
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), throughput };
}
