// Agents bench: what the agent loop adds per step over the model's own latency. A zero-latency
// fake OpenAI-compatible model runs inside this script (127.0.0.1, BENCH_FAKE_MODEL_PORT, default
// 18999); Loom must be allowed to call it, so start Loom with
//   npm start -- --no-rate-limits --var ALLOW_PRIVATE_MODEL_HOSTS=127.0.0.1:18999
// A run whose model asks for a tool on each of STEPS turns (a tool name the agent does not have:
// no tool work, only the loop: the result saved, the turn saved, the next request) is compared
// with a run that answers on the first turn: per step = (T_many - T_one) / (STEPS - 1), minus the
// fake model's own round trip measured from here.
import { createServer } from "node:http";
import { percentile } from "../latency.mjs";

const BASE = process.env.LOOM_URL ?? "http://127.0.0.1:8787";
const PORT = Number(process.env.BENCH_FAKE_MODEL_PORT ?? 18999);
const RUNS = Number(process.env.BENCH_AGENT_RUNS ?? 60);
const STEPS = 11;

function completion(message) {
  return JSON.stringify({
    id: "bench",
    object: "chat.completion",
    choices: [{ index: 0, message, finish_reason: message.tool_calls ? "tool_calls" : "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1 },
  });
}

const server = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => (body += chunk));
  request.on("end", () => {
    const messages = body ? (JSON.parse(body).messages ?? []) : [];
    const user = messages.find((m) => m.role === "user")?.content ?? "";
    const turns = messages.filter((m) => m.role === "tool").length;
    const wanted = user === "many" ? STEPS - 1 : 0;
    const message =
      turns < wanted
        ? {
            role: "assistant",
            content: null,
            tool_calls: [{ id: `c${turns}`, type: "function", function: { name: "noop", arguments: "{}" } }],
          }
        : { role: "assistant", content: "done" };
    response.writeHead(200, { "content-type": "application/json" });
    response.end(completion(message));
  });
});
await new Promise((resolve) => server.listen(PORT, "127.0.0.1", resolve));

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
const owner = { authorization: `Bearer ${signup.access_token}` };
const { key } = await post("/auth/api-keys", { name: "bench" }, owner);
const auth = { authorization: `Bearer ${key}` };
await post(
  "/admin/connections/create",
  { name: "fake", kind: "openai", base_url: `http://127.0.0.1:${PORT}/v1`, chat_model: "zero" },
  owner,
);
const { id } = await post(
  "/v1/agent",
  {
    name: `bench-${tag}`,
    llm_client_key: { provider: "fake", model_id: "zero" },
    inputs: { i: { name: "q", io_type: "string" } },
    max_steps: STEPS,
    max_tool_errors: STEPS,
    tools: {},
  },
  auth,
);

async function timed(q) {
  const started = performance.now();
  const result = await post(`/v1/agent/${id}/run`, { inputs: { q } }, auth);
  const ms = performance.now() - started;
  const turns = q === "many" ? STEPS : 1;
  if (
    result.status !== "success" ||
    result.outputs?.output !== "done" ||
    result.steps.filter((s) => s.type === "model").length !== turns
  )
    throw new Error(`unexpected answer: ${JSON.stringify(result).slice(0, 400)}`);
  return ms;
}

async function modelRoundTrip() {
  const started = performance.now();
  await fetch(`http://127.0.0.1:${PORT}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ messages: [{ role: "user", content: "one" }] }),
  }).then((r) => r.text());
  return performance.now() - started;
}

for (let i = 0; i < 10; i++) await timed(i % 2 ? "one" : "many"); // warm-up
const one = [];
const many = [];
const perStep = [];
const model = [];
for (let i = 0; i < RUNS; i++) {
  const a = await timed("one");
  const b = await timed("many");
  one.push(a);
  many.push(b);
  perStep.push((b - a) / (STEPS - 1));
  model.push(await modelRoundTrip());
}
server.close();
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const p50 = (xs) => Number(percentile(sorted(xs), 50).toFixed(2));
const p99 = (xs) => Number(percentile(sorted(xs), 99).toFixed(2));
const overhead = perStep.map((s, i) => s - model[i]);
const figures = {
  section: "agents",
  server: BASE,
  runs: RUNS,
  one_turn_run_ms: { p50: p50(one), p99: p99(one) },
  eleven_turn_run_ms: { p50: p50(many), p99: p99(many) },
  per_step_ms: { p50: p50(perStep), p99: p99(perStep) },
  fake_model_round_trip_ms: { p50: p50(model) },
  loop_overhead_per_step_ms: { p50: p50(overhead), p99: p99(overhead) },
};
console.log(JSON.stringify(figures, null, 2));
console.log(
  `| agent loop overhead per step over the model's latency, p50 | ${figures.loop_overhead_per_step_ms.p50} ms |`,
);
