// Bench section: what the local runner adds to every request. p50/p99 of two requests that do
// almost nothing else, sent one after another on a kept-alive connection:
//   - a 401 (no Authorization header): routing and the auth middleware, no D1;
//   - GET /v1/knowledge-base?id= with an API key: auth (one D1 read of the key) and one D1 read.
// Compare `npm start` with `npm run dev` (wrangler dev) on the same machine and code.
// Options: --requests=2000 (per figure, after --warmup=200)
import { measureLatency } from "../latency.mjs";

export async function run({ base, args }) {
  const requests = Number(args.get("requests") ?? 2000);
  const warmup = Number(args.get("warmup") ?? 200);

  async function api(path, body, token) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    const response = await fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
    const json = await response.json();
    if (!response.ok) throw new Error(`POST ${path} -> ${response.status} ${JSON.stringify(json)}`);
    return json;
  }

  const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const signup = await api("/auth/signup", {
    email: `runner-${tag}@example.com`,
    password: "runner bench password",
    username: `runner${tag}`,
    organization: `runner-${tag}`,
  });
  const { key } = await api("/auth/api-keys", { name: "runner" }, signup.access_token);
  const { id } = await api("/v1/knowledge-base", { name: `runner-${tag}` }, key);

  async function measure(label, path, headers, status) {
    const once = async () => {
      const response = await fetch(`${base}${path}`, { headers });
      await response.arrayBuffer();
      if (response.status !== status) throw new Error(`${label}: expected ${status}, got ${response.status}`);
    };
    return { label, ...(await measureLatency(once, { warmup, runs: requests })) };
  }

  const rows = [
    await measure("401, no Authorization header", "/v1/knowledge-bases", {}, 401),
    await measure(
      "GET /v1/knowledge-base?id= (auth + one D1 read)",
      `/v1/knowledge-base?id=${id}`,
      { authorization: `Bearer ${key}` },
      200,
    ),
  ];
  console.log(`${requests} sequential requests per row after ${warmup} warm-up, against ${base}`);
  console.log("| request | p50 ms | p99 ms |");
  console.log("|---|---|---|");
  for (const r of rows) console.log(`| ${r.label} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} |`);
  return rows;
}
