// Bench section "paired": the hybrid top-10 query of the scale section on two servers at once,
// alternated query by query (A then B, then B then A), so the slow stretches of a shared machine
// fall on both alike. Rounds of the scale section one server after the other spread by ±15% here
// (BENCHMARKS.md, "Paired runs"); a change of a few percent needs this. Each server needs a kept
// knowledge base of the same corpus (`npm run bench -- scale --keep` prints --kb and --key).
//   npm run bench -- paired --base=URL_A --kb=ID --key=KEY --server-pid=PID \
//     --other=URL_B --other-kb=ID --other-key=KEY --other-pid=PID [--queries=400] [--rounds=3]
// Prints per round and server: the server's CPU per query (user + system, /proc) and p50/p99.
import { cpuSeconds, percentile } from "../latency.mjs";
import { apiClient, syntheticCranfield } from "../bench-corpus.mjs";

export async function run({ base, args }) {
  const need = ["kb", "key", "other", "other-kb", "other-key"].filter((k) => !args.has(k));
  if (need.length) throw new Error(`paired needs --${need.join(", --")} (see scripts/bench/paired.mjs)`);
  const servers = [
    { name: "A", base, kb: args.get("kb"), key: args.get("key"), pid: args.get("server-pid") },
    {
      name: "B",
      base: args.get("other"),
      kb: args.get("other-kb"),
      key: args.get("other-key"),
      pid: args.get("other-pid"),
    },
  ];
  const count = Number(args.get("queries") ?? 400);
  const rounds = Number(args.get("rounds") ?? 3);
  const { queries } = syntheticCranfield();
  for (const s of servers) s.api = apiClient(s.base);
  const ask = async (s, i) => {
    const started = performance.now();
    await s.api(`/v1/knowledge-base/${s.kb}/query`, {
      method: "POST",
      token: s.key,
      body: { queries: [queries[i % queries.length]], search_metadata: { top_k: 10 } },
    });
    return performance.now() - started;
  };
  for (let i = 0; i < 20; i++) for (const s of servers) await ask(s, i + 200);
  for (let round = 1; round <= rounds; round++) {
    const cpu0 = servers.map((s) => cpuSeconds(s.pid));
    const latencies = servers.map(() => []);
    for (let i = 0; i < count; i++) {
      const order = i % 2 === 0 ? [0, 1] : [1, 0];
      for (const at of order) latencies[at].push(await ask(servers[at], i));
    }
    servers.forEach((s, at) => {
      const sorted = latencies[at].sort((a, b) => a - b);
      const cpu1 = cpuSeconds(s.pid);
      const cpu =
        cpu0[at] === null || cpu1 === null
          ? ""
          : `, server CPU ${(((cpu1 - cpu0[at]) * 1000) / count).toFixed(2)} ms/query`;
      console.log(
        `round ${round} ${s.name} (${s.base}): p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms${cpu}`,
      );
    });
  }
}
