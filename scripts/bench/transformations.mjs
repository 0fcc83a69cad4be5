// Bench section: per-run overhead of a trivial transformation (JavaScript and Python) on a
// running Loom. Sequential requests on one connection at a time, so the figures are latency,
// not throughput. The baseline is an authenticated fetch of the same record (auth + one D1
// read), so `run - baseline` is what the sandbox adds: a fresh interpreter, the Dynamic
// Worker hop (when there is a loader), input and output validation.
import { measureLatency } from "../latency.mjs";

const base = process.env.LOOM_URL ?? "http://127.0.0.1:8787";
const runs = Number(process.env.BENCH_RUNS ?? 300);
const warmup = 20;

async function call(path, init = {}) {
  const response = await fetch(`${base}${path}`, init);
  const body = await response.json();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}
const jsonInit = (body, key) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
  body: JSON.stringify(body),
});

async function time(label, fn) {
  return { label, ...(await measureLatency(fn, { warmup, runs })) };
}

const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const signup = await call(
  "/auth/signup",
  jsonInit({
    email: `bench-${suffix}@example.com`,
    password: "bench password 123",
    username: `bench${suffix}`,
    organization: `bench-${suffix}`,
  }),
);
const { key } = await call("/auth/api-keys", jsonInit({ name: "bench" }, signup.access_token));
const js = await call(
  "/v1/transformation",
  jsonInit(
    {
      name: `double-js-${suffix}`,
      language: "javascript",
      function_name: "double",
      function: "function double({ x }) { return { y: x * 2 }; }",
      input_schema: { x: "number" },
      output_schema: { y: "number" },
    },
    key,
  ),
);
const py = await call(
  "/v1/transformation",
  jsonInit(
    {
      name: `double-py-${suffix}`,
      function_name: "double",
      function: "def double(x):\n    return {'y': x * 2}\n",
      input_schema: { x: "number" },
      output_schema: { y: "number" },
    },
    key,
  ),
);
const auth = { headers: { authorization: `Bearer ${key}` } };

const results = [
  await time("baseline: GET /v1/transformation?id", () => call(`/v1/transformation?id=${js.id}`, auth)),
  await time("run JavaScript (QuickJS)", () =>
    call(`/v1/transformation/${js.id}/run`, jsonInit({ inputs: { x: 21 } }, key)),
  ),
  await time("run Python (MicroPython)", () =>
    call(`/v1/transformation/${py.id}/run`, jsonInit({ inputs: { x: 21 } }, key)),
  ),
];
const baseline = results[0];
console.log(`${runs} sequential requests each after ${warmup} warm-up, against ${base}`);
console.log("| what | p50 ms | p99 ms | overhead over baseline p50 / p99 ms |");
console.log("|---|---|---|---|");
for (const r of results) {
  const overhead = r === baseline ? "-" : `${(r.p50 - baseline.p50).toFixed(1)} / ${(r.p99 - baseline.p99).toFixed(1)}`;
  console.log(`| ${r.label} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${overhead} |`);
}
