// Pipelines bench: sync-run latency (p50, p99) of a five-node offline pipeline, and how many such
// runs complete per second with 50 in flight. Needs a running Loom (`npm start`); LOOM_URL picks it.
import { percentile } from "../latency.mjs";
const BASE = process.env.LOOM_URL ?? "http://127.0.0.1:8787";
const SEQUENTIAL = Number(process.env.BENCH_PIPELINE_RUNS ?? 200);
const THROUGHPUT_RUNS = Number(process.env.BENCH_PIPELINE_THROUGHPUT_RUNS ?? 500);
const IN_FLIGHT = 50;

async function post(path, body, headers = {}) {
  const response = await fetch(`${BASE}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const signup = await post("/auth/signup", {
  email: `bench-${tag}@example.com`,
  password: "bench password 123",
  username: `bench${tag}`,
  organization: `bench-${tag}`,
});
const { key } = await post("/auth/api-keys", { name: "bench" }, { authorization: `Bearer ${signup.access_token}` });
const auth = { authorization: `Bearer ${key}` };

const { id } = await post(
  "/v1/pipeline",
  {
    name: `bench-five-${tag}`,
    nodes: [
      { id: "in", type: "input", config: { name: "q", type: "text" } },
      { id: "greet", type: "text", config: { text: "Hello {{in}}" } },
      { id: "shout", type: "text", config: { text: "{{greet}}!" } },
      { id: "check", type: "condition", config: { left: "{{shout}}", operator: "contains", right: "Hello" } },
      { id: "out", type: "output", config: { name: "answer", value: "{{shout}}" } },
    ],
    edges: [
      { source: "in", target: "greet" },
      { source: "greet", target: "shout" },
      { source: "shout", target: "check" },
      { source: "check", target: "out", source_output: "true" },
    ],
  },
  auth,
);

async function runOnce(i) {
  const started = performance.now();
  const result = await post(`/v1/pipeline/${id}/run`, { inputs: { q: `world ${i}` } }, auth);
  const ms = performance.now() - started;
  if (result.status !== "success" || result.outputs?.answer !== `Hello world ${i}!`)
    throw new Error(`unexpected answer: ${JSON.stringify(result)}`);
  return ms;
}

for (let i = 0; i < 20; i++) await runOnce(i); // warm-up: first objects, compiled code paths
const latencies = [];
for (let i = 0; i < SEQUENTIAL; i++) latencies.push(await runOnce(i));
latencies.sort((a, b) => a - b);

let next = 0;
const throughputStart = performance.now();
await Promise.all(
  Array.from({ length: IN_FLIGHT }, async () => {
    while (next < THROUGHPUT_RUNS) await runOnce(next++);
  }),
);
const seconds = (performance.now() - throughputStart) / 1000;

const figures = {
  section: "pipelines",
  server: BASE,
  sync_run_ms: {
    runs: SEQUENTIAL,
    p50: Number(percentile(latencies, 50).toFixed(1)),
    p99: Number(percentile(latencies, 99).toFixed(1)),
  },
  throughput: {
    runs: THROUGHPUT_RUNS,
    in_flight: IN_FLIGHT,
    seconds: Number(seconds.toFixed(2)),
    runs_per_second: Number((THROUGHPUT_RUNS / seconds).toFixed(1)),
  },
};
console.log(JSON.stringify(figures, null, 2));
console.log(`| five-node sync run, p50 | ${figures.sync_run_ms.p50} ms |`);
console.log(`| five-node sync run, p99 | ${figures.sync_run_ms.p99} ms |`);
console.log(`| completed runs/s, ${IN_FLIGHT} in flight | ${figures.throughput.runs_per_second} |`);
