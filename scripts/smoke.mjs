// `npm run smoke [-- --base=URL] [--large=5000] [--readme]`: an end-to-end check of a running Loom
// (`npm start`; default http://127.0.0.1:8787). It walks what a new user does and exercises
// every binding wrangler.toml declares:
//   signup and an API key (D1, secrets, LOGIN_LIMITER through a login), a knowledge base with an
//   indexed text file and a query (R2, the KB_INDEX Durable Object), the pipeline "Hello world"
//   and a pipeline with a wait node (PIPELINE_RUNS, its alarm), a transformation in JavaScript and
//   in Python (LOADER: Dynamic Workers), a chatbot run (CONVERSATIONS), and a large document of
//   --large chunks that only finishes from the index Durable Object's alarm.
// --readme runs only README.md's "first session" block, as pasted into `sh` (with a fresh email),
// so the README's example cannot rot.
// Prints one line per step; exits 1 on the first failure.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { requireLoom, takeBase } from "./loom-base.mjs";

const usage = "usage: npm run smoke [-- --base=URL] [--large=5000] [--readme]";
const { base, rest } = takeBase(process.argv.slice(2), "smoke");
const argv = new Map(
  rest.map((a) => {
    const [key, value] = a.replace(/^--/, "").split("=");
    if (key === "help" || key === "h") {
      console.log(usage);
      process.exit(0);
    }
    if (!a.startsWith("--") || !["large", "readme"].includes(key)) {
      console.error(`smoke: unknown argument "${a}"; ${usage}`);
      process.exit(2);
    }
    return [key, value ?? "true"];
  }),
);
const largeChunks = Number(argv.get("large") ?? 5000);
await requireLoom(base, "smoke");

if (argv.has("readme")) {
  runReadmeBlock();
  process.exit(0);
}

/** Runs README.md's first-session block in `sh` against `base`, with a fresh email and organization. */
function runReadmeBlock() {
  const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
  const block = /A first session[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) {
    console.log("FAIL README.md has no first-session ```sh block");
    process.exit(1);
  }
  const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const script = block
    .replace(/^BASE=.*$/m, `BASE=${base}`)
    .replaceAll("me@example.com", `readme-${tag}@example.com`)
    .replaceAll('"organization":"acme"', `"organization":"readme-${tag}"`);
  const run = spawnSync("sh", ["-e", "-c", `${script}\necho; echo "TOKEN=\${#TOKEN} KEY=\${KEY%%_*}_ KB=\${KB}"`], {
    encoding: "utf8",
  });
  const output = `${run.stdout}${run.stderr}`;
  const ok =
    run.status === 0 &&
    /"document_ids":\["/.test(output) &&
    /"status":"success","result":\{"chunks":\[\{/.test(output) &&
    /Refunds are paid/.test(output) &&
    /KEY=sk_/.test(output);
  console.log(`${ok ? "ok  " : "FAIL"} README first session against ${base}${ok ? "" : `:\n${output}`}`);
  if (!ok) process.exit(1);
}

async function api(method, path, body, key) {
  const headers = { "content-type": "application/json" };
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = { raw: text.slice(0, 300) };
  }
  if (!response.ok) throw new Error(`${method} ${path} -> ${response.status} ${JSON.stringify(json)}`);
  return json;
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function step(name, fn) {
  const started = performance.now();
  try {
    const detail = await fn();
    console.log(`ok   ${name} (${((performance.now() - started) / 1000).toFixed(2)} s)${detail ? `: ${detail}` : ""}`);
  } catch (error) {
    console.log(`FAIL ${name}: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}

/** Polls the documents list until every id is ready (or one failed), for up to `seconds`. */
async function waitReady(kb, ids, key, seconds) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const { documents } = await api("GET", `/v1/knowledge-base/${kb}/documents`, undefined, key);
    const mine = documents.filter((d) => ids.includes(d._id));
    const failed = mine.find((d) => d.status === "failed");
    if (failed) throw new Error(`document ${failed._id} failed: ${failed.error}`);
    if (mine.length === ids.length && mine.every((d) => d.status === "ready")) return mine;
    if (Date.now() > deadline)
      throw new Error(`not ready after ${seconds} s: ${JSON.stringify(mine.map((d) => [d.status, d.chunkCount]))}`);
    await sleep(250);
  }
}

const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const password = "smoke test password 123";
let token;
let key;
let kb;

console.log(`smoke test against ${base}`);
await step("unauthenticated request answers 401", async () => {
  const response = await fetch(`${base}/v1/knowledge-bases`);
  check(response.status === 401, `expected 401, got ${response.status}`);
});
await step("signup", async () => {
  const signup = await api("POST", "/auth/signup", {
    email: `smoke-${tag}@example.com`,
    password,
    username: `smoke${tag}`,
    organization: `smoke-${tag}`,
  });
  token = signup.access_token;
  check(typeof token === "string", "no access_token");
});
await step("login", async () => {
  const login = await api("POST", "/auth/login", { username: `smoke-${tag}@example.com`, password });
  check(typeof login.access_token === "string", "no access_token");
});
await step("API key", async () => {
  ({ key } = await api("POST", "/auth/api-keys", { name: "smoke" }, token));
  check(typeof key === "string", "no key");
});

await step("knowledge base: create, index a text file, query", async () => {
  ({ id: kb } = await api("POST", "/v1/knowledge-base", { name: `smoke-${tag}` }, key));
  const text =
    "Loom keeps each knowledge base in its own Durable Object.\n\nThe heron is a long-legged freshwater bird that hunts fish in shallow water.";
  const indexed = await api(
    "POST",
    `/v1/knowledge-base/${kb}/index`,
    {
      file_data: {
        file: {
          type: "file",
          raw_bytes: Buffer.from(text).toString("base64"),
          metadata: { name: "birds.txt", mime_type: "text/plain" },
        },
      },
    },
    key,
  );
  await waitReady(kb, indexed.document_ids, key, 60);
  const { result } = await api(
    "POST",
    `/v1/knowledge-base/${kb}/query`,
    { queries: ["which bird hunts fish?"], search_metadata: { top_k: 3 } },
    key,
  );
  const top = JSON.stringify(result).match(/heron/i);
  check(top, `the query did not find the heron passage: ${JSON.stringify(result).slice(0, 300)}`);
  return "found the passage";
});

await step('pipeline "Hello world"', async () => {
  const { id } = await api(
    "POST",
    "/v1/pipeline",
    {
      name: `hello-${tag}`,
      nodes: [
        { id: "in", type: "input", config: { name: "name", type: "text" } },
        { id: "greet", type: "text", config: { text: "Hello {{in}}" } },
        { id: "out", type: "output", config: { name: "greeting", value: "{{greet}}" } },
      ],
      edges: [
        { source: "in", target: "greet" },
        { source: "greet", target: "out" },
      ],
    },
    key,
  );
  const run = await api("POST", `/v1/pipeline/${id}/run`, { inputs: { name: "world" } }, key);
  check(run.status === "success" && run.outputs?.greeting === "Hello world", `unexpected run: ${JSON.stringify(run)}`);
  return run.outputs.greeting;
});

await step("pipeline with a 1 s wait node (Durable Object alarm)", async () => {
  const { id } = await api(
    "POST",
    "/v1/pipeline",
    {
      name: `wait-${tag}`,
      nodes: [
        { id: "in", type: "input", config: { name: "name", type: "text" } },
        { id: "pause", type: "wait", config: { seconds: 1 } },
        { id: "out", type: "output", config: { name: "echo", value: "{{pause}}" } },
      ],
      edges: [
        { source: "in", target: "pause" },
        { source: "pause", target: "out" },
      ],
    },
    key,
  );
  const { run_id } = await api("POST", `/v1/pipeline/${id}/run`, { inputs: { name: "later" }, background: true }, key);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await api("GET", `/v1/pipeline/${id}/run/status/${run_id}`, undefined, key);
    if (status.status === "completed") {
      check(status.result?.echo === "later", `unexpected result: ${JSON.stringify(status.result)}`);
      return "completed after the alarm";
    }
    check(status.status !== "failed" && status.status !== "terminated", `run ${status.status}: ${status.error}`);
    check(Date.now() < deadline, `still ${status.status} after 30 s`);
    await sleep(200);
  }
});

for (const [language, source] of [
  ["javascript", "function double({ x }) { return { y: x * 2 }; }"],
  ["python", "def double(x):\n    return {'y': x * 2}\n"],
]) {
  await step(`transformation run in ${language}`, async () => {
    const { id } = await api(
      "POST",
      "/v1/transformation",
      {
        name: `double-${language}-${tag}`,
        language,
        function_name: "double",
        function: source,
        input_schema: { x: "number" },
        output_schema: { y: "number" },
      },
      key,
    );
    const run = await api("POST", `/v1/transformation/${id}/run`, { inputs: { x: 21 } }, key);
    check(run.result?.y === 42, `unexpected result: ${JSON.stringify(run)}`);
    return "21 * 2 = 42";
  });
}

await step("chatbot run over the knowledge base", async () => {
  const { id } = await api(
    "POST",
    "/v1/chatbot",
    { name: `smoke-${tag}`, description: "smoke", knowledge_base_ids: [kb] },
    key,
  );
  const run = await api("POST", `/v1/chatbot/${id}/run`, { text: "Which bird hunts fish?" }, key);
  check(
    /heron/i.test(JSON.stringify(run)),
    `the answer does not mention the heron: ${JSON.stringify(run).slice(0, 300)}`,
  );
  return `answered by ${run.answered_by ?? "?"}`;
});

await step(`large document (${largeChunks} chunks) reaches ready through alarms`, async () => {
  // chunk_size 48: a 20-word sentence and its period are 21 tokens, so two sentences per chunk.
  const { id: big } = await api("POST", "/v1/knowledge-base", { name: `smoke-large-${tag}`, chunk_size: 48 }, key);
  const vocabulary =
    "wing flow shock boundary layer pressure heat transfer supersonic laminar turbulent nozzle cone plate surface velocity drag lift model theory".split(
      " ",
    );
  let seed = 7;
  const word = () => vocabulary[(seed = (seed * 1103515245 + 12345) >>> 0) % vocabulary.length];
  const sentences = [];
  for (let i = 0; i < largeChunks * 2; i++) sentences.push(`${Array.from({ length: 20 }, word).join(" ")}.`);
  const indexed = await api(
    "POST",
    `/v1/knowledge-base/${big}/index`,
    {
      file_data: {
        file: {
          type: "file",
          raw_bytes: Buffer.from(sentences.join(" ")).toString("base64"),
          metadata: { name: "large.txt", mime_type: "text/plain" },
        },
      },
    },
    key,
  );
  // The index call embeds one step (1,000 chunks) itself; the rest must come from alarms.
  const { documents: early } = await api("GET", `/v1/knowledge-base/${big}/documents`, undefined, key);
  const first = early.find((d) => d._id === indexed.document_ids[0])?.status;
  const [doc] = await waitReady(big, indexed.document_ids, key, 600);
  check(doc.chunkCount === largeChunks, `expected ${largeChunks} chunks, got ${doc.chunkCount}`);
  await api("DELETE", `/v1/knowledge-base/${big}`, undefined, key);
  return `${first} after the index call, then ${doc.chunkCount} chunks ready`;
});

console.log("all steps passed");
