// Chatbots bench: run latency (p50, p99) on the embedded default (no model connection: the offline
// extractive answerer over a knowledge base), time to the first streamed event, and 50 messages
// sent at once to one conversation, checked to be all stored, in order.
// Needs a running Loom (`npm start`); LOOM_URL picks it.
import { percentile } from "../latency.mjs";
const BASE = process.env.LOOM_URL ?? "http://127.0.0.1:8787";
const SEQUENTIAL = Number(process.env.BENCH_CHATBOT_RUNS ?? 100);
const STREAMED = Number(process.env.BENCH_CHATBOT_STREAMS ?? 50);
const CONCURRENT = 50;

async function request(method, path, body, headers = {}) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = { raw: text.slice(0, 200) };
  }
  return { status: response.status, json };
}

async function post(path, body, headers) {
  const { status, json } = await request("POST", path, body, headers);
  if (status >= 300) throw new Error(`${path}: ${status} ${JSON.stringify(json)}`);
  return json;
}

const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const signup = await post("/auth/signup", {
  email: `chatbench-${tag}@example.com`,
  password: "bench password 123",
  username: `chatbench${tag}`,
  organization: `chatbench-${tag}`,
});
const token = { authorization: `Bearer ${signup.access_token}` };
const { key } = await post("/auth/api-keys", { name: "bench" }, token);
const auth = { authorization: `Bearer ${key}` };

// A small knowledge base, when this build serves knowledge bases; otherwise a prompt-only chatbot.
const HANDBOOK = [
  "Loom answers each conversation's messages one after another, in the order they arrive.",
  "A deployed chatbot has a public profile that shows its greeting, colours and suggested questions.",
  "Visitors get signed sessions, so each visitor sees only their own conversations.",
  "Telephony and chat workspace webhooks verify the provider's signature before answering.",
  "Conversation history given to the model is cut to a token budget of three thousand tokens.",
].join("\n\n");
let knowledgeBaseIds = [];
const kb = await request("POST", "/v1/knowledge-base", { name: `bench-kb-${tag}`, description: "chatbot bench" }, auth);
if (kb.status === 200 && kb.json.id) {
  const indexed = await request(
    "POST",
    `/v1/knowledge-base/${kb.json.id}/index`,
    {
      file_data: {
        file: {
          type: "file",
          raw_bytes: Buffer.from(HANDBOOK).toString("base64"),
          metadata: { name: "handbook.txt", path: "handbook.txt", mime_type: "text/plain" },
        },
      },
    },
    auth,
  );
  if (indexed.status !== 200) throw new Error(`indexing failed: ${indexed.status} ${JSON.stringify(indexed.json)}`);
  // Wait until the document is searchable.
  for (let i = 0; i < 100; i++) {
    const docs = await request("GET", `/v1/knowledge-base/${kb.json.id}/documents`, undefined, auth);
    const states = JSON.stringify(docs.json);
    if (!states.includes("indexing")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  knowledgeBaseIds = [kb.json.id];
}
const setup = knowledgeBaseIds.length
  ? "extractive answerer over a 5-passage knowledge base"
  : "prompt-only chatbot (this build serves no knowledge bases)";
const { id } = await post(
  "/v1/chatbot",
  {
    name: `bench-${tag}`,
    description: "bench",
    ...(knowledgeBaseIds.length ? { knowledge_base_ids: knowledgeBaseIds } : { system_prompt: "Answer briefly." }),
  },
  auth,
);

const QUESTIONS = [
  "In what order are messages answered?",
  "What does the public profile show?",
  "What do visitors see?",
  "How are webhooks checked?",
  "How long is the history?",
];
const fmt = (ms) => `${ms.toFixed(1)} ms`;

// Probe once: a build without the provider layer answers 503, which is reported, not timed.
const probe = await request("POST", `/v1/chatbot/${id}/run`, { text: QUESTIONS[0] }, auth);
const answering = probe.status === 200;
const results = {
  setup,
  answering: answering ? `answered by ${probe.json.answered_by}` : `not available: ${probe.status} ${probe.json.error}`,
};

if (answering) {
  const latencies = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const started = performance.now();
    const { status, json } = await request(
      "POST",
      `/v1/chatbot/${id}/run`,
      { text: QUESTIONS[i % QUESTIONS.length] },
      auth,
    );
    latencies.push(performance.now() - started);
    if (status !== 200 || json.status !== "success") throw new Error(`run failed: ${status} ${JSON.stringify(json)}`);
  }
  latencies.sort((a, b) => a - b);
  results.run = { runs: SEQUENTIAL, p50: fmt(percentile(latencies, 50)), p99: fmt(percentile(latencies, 99)) };

  const firstEvents = [];
  const totals = [];
  for (let i = 0; i < STREAMED; i++) {
    const started = performance.now();
    const response = await fetch(`${BASE}/v1/chatbot/${id}/run`, {
      method: "POST",
      headers: { "content-type": "application/json", ...auth },
      body: JSON.stringify({ text: QUESTIONS[i % QUESTIONS.length], stream: true }),
    });
    const reader = response.body.getReader();
    let first = null;
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (first === null && text.includes("data: ")) first = performance.now() - started;
    }
    totals.push(performance.now() - started);
    firstEvents.push(first ?? Infinity);
    if (!text.includes('"status":"success"')) throw new Error(`stream failed: ${text.slice(-300)}`);
  }
  firstEvents.sort((a, b) => a - b);
  totals.sort((a, b) => a - b);
  results.firstStreamedEvent = {
    streams: STREAMED,
    p50: fmt(percentile(firstEvents, 50)),
    p99: fmt(percentile(firstEvents, 99)),
    wholeStreamP50: fmt(percentile(totals, 50)),
  };
}

// 50 messages at once to one conversation: every one stored, each answer right after its message.
const opened = await request("POST", `/v1/chatbot/${id}/run`, { text: "start" }, auth);
const conversationId =
  opened.json.conversation_id ??
  (await request("GET", "/chatbots/conversations", undefined, token)).json.conversations?.[0]?._id;
const started = performance.now();
const burst = await Promise.all(
  Array.from({ length: CONCURRENT }, (_, i) =>
    request("POST", `/v1/chatbot/${id}/run`, { text: `burst message ${i}`, conversation_id: conversationId }, auth),
  ),
);
const burstMs = performance.now() - started;
const read = await request("GET", `/chatbots/conversations/${conversationId}`, undefined, token);
const messages = read.json.conversation.messages;
const users = messages.filter((m) => m.role === "user" && m.content.startsWith("burst message "));
const alternating = messages.every(
  (m, i) => m.role === (i % 2 === 0 ? "user" : "assistant") && (i % 2 === 0 || m.replyTo === messages[i - 1]._id),
);
const stored = new Set(users.map((m) => m.content));
results.concurrent = {
  sent: CONCURRENT,
  answered: burst.filter((r) => r.status === 200).length,
  stored: stored.size,
  allStored: stored.size === CONCURRENT,
  inOrder: alternating,
  wallClock: fmt(burstMs),
};

console.log(JSON.stringify(results, null, 2));
if (!results.concurrent.allStored || !results.concurrent.inOrder) process.exit(1);
