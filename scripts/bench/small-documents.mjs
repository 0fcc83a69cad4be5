// Bench section "small documents": many short files into one knowledge base, the way a user
// uploading a folder does it. 450 Cranfield abstracts (../shared/data/cranfield, title + abstract,
// ~1 KB each) go into a fresh knowledge base per figure:
//   - in sequence, one document per request: per-document p50/p99 and documents/s;
//   - --in-flight (default 8) requests at once, one document each: documents/s;
//   - the batch form, --batch (default 50) files per request (`file_data` as a list), in sequence
//     and with --in-flight batches at once: documents/s.
// Every document must be `ready` when its request answers (checked on the documents route after
// each figure). Targets (issue 14): >= 500 documents/s with 8 in flight, >= 2,000 documents/s in
// batches, p50 <= 10 ms in sequence.
// Options: --documents=450  --in-flight=8  --batch=50  --forms=sequence,in-flight,batches,batches-in-flight
// (--forms runs only the named rows, e.g. to alternate one row between two servers)
// --server-pid=PID (the server's workerd process, Linux): adds the server's CPU (user + system, from
// /proc) per document over each row's timed requests, steadier than wall time on a shared machine.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { cpuSeconds, percentile } from "../latency.mjs";
import { apiClient } from "../bench-corpus.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Cranfield's records as `title\n\nabstract` texts, in file order. */
function cranfieldAbstracts(count) {
  const text = readFileSync(join(root, "../shared/data/cranfield/cran.all.1400"), "utf8");
  return text
    .split(/^\.I .*$/m)
    .map((record) => {
      const title = /\.T\s*([\s\S]*?)\n\.A/.exec(record)?.[1] ?? "";
      const body = /\.W\s*([\s\S]*)$/.exec(record)?.[1] ?? "";
      return `${title.replace(/\s+/g, " ").trim()}\n\n${body.replace(/\s+/g, " ").trim()}`;
    })
    .filter((t) => t.trim().length > 10)
    .slice(0, count);
}

export async function run({ base, args }) {
  const serverPid = args.get("server-pid");
  const count = Number(args.get("documents") ?? 450);
  const inFlight = Number(args.get("in-flight") ?? 8);
  const batchSize = Number(args.get("batch") ?? 50);
  const docs = cranfieldAbstracts(count);
  const forms = new Set((args.get("forms") ?? "sequence,in-flight,batches,batches-in-flight").split(","));

  const api = apiClient(base);

  const tag = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const signup = await api("/auth/signup", {
    method: "POST",
    body: {
      email: `small-${tag}@example.com`,
      password: "benchmark-password",
      username: `small${tag}`,
      organization: `small-${tag}`,
    },
  });
  const { key } = await api("/auth/api-keys", { method: "POST", token: signup.access_token, body: { name: "bench" } });
  const file = (text, i) => ({
    file: {
      type: "file",
      raw_bytes: Buffer.from(text).toString("base64"),
      metadata: { name: `cran-${i + 1}.txt`, mime_type: "text/plain" },
    },
  });

  let kbNumber = 0;
  async function freshKnowledgeBase() {
    const { id } = await api("/v1/knowledge-base", {
      method: "POST",
      token: key,
      body: { name: `small-${kbNumber++}` },
    });
    // One throwaway document, so the figures exclude the index object's first start.
    await api(`/v1/knowledge-base/${id}/index`, {
      method: "POST",
      token: key,
      body: { file_data: file("warm up", -1) },
    });
    return id;
  }

  /** Sends the requests with `concurrency` in flight; answers seconds and each request's ms. */
  async function drive(kb, bodies, concurrency) {
    const times = [];
    let next = 0;
    const t0 = performance.now();
    const cpu0 = cpuSeconds(serverPid);
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < bodies.length) {
          const body = bodies[next++];
          const q0 = performance.now();
          await api(`/v1/knowledge-base/${kb}/index`, { method: "POST", token: key, body });
          times.push(performance.now() - q0);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = cpuSeconds(serverPid);
    const cpu = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
    const { documents } = await api(`/v1/knowledge-base/${kb}/documents`, { token: key });
    const notReady = documents.filter((d) => d.status !== "ready");
    if (documents.length !== docs.length + 1 || notReady.length)
      throw new Error(
        `expected ${docs.length + 1} ready documents, got ${documents.length} (${notReady.length} not ready)`,
      );
    await api(`/v1/knowledge-base/${kb}`, { method: "DELETE", token: key });
    return { seconds, cpu, times: times.sort((a, b) => a - b) };
  }

  const single = docs.map((text, i) => ({ file_data: file(text, i) }));
  const batches = [];
  for (let i = 0; i < docs.length; i += batchSize)
    batches.push({ file_data: docs.slice(i, i + batchSize).map((text, j) => file(text, i + j)) });

  const rows = [];
  const report = (label, { seconds, cpu, times }, perRequest) => {
    const row = { label, perSecond: docs.length / seconds, p50: percentile(times, 50), p99: percentile(times, 99) };
    rows.push(row);
    console.log(
      `| ${label} | ${docs.length} | ${seconds.toFixed(2)} | ${row.perSecond.toFixed(0)} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${perRequest} |${serverPid ? ` ${cpu === null ? "n/a" : ((cpu * 1000) / docs.length).toFixed(3)} |` : ""}`,
    );
    return row;
  };
  console.log(
    `${docs.length} Cranfield abstracts (mean ${Math.round(docs.reduce((n, d) => n + d.length, 0) / docs.length)} bytes), a fresh knowledge base per row`,
  );
  console.log(
    `| form | documents | seconds | documents/s | request p50 ms | request p99 ms | documents per request |${serverPid ? " server CPU ms per document |" : ""}`,
  );
  console.log(`|---|---|---|---|---|---|---|${serverPid ? "---|" : ""}`);
  const none = { perSecond: 0, p50: Number.NaN };
  const sequence = forms.has("sequence")
    ? report("one per request, in sequence", await drive(await freshKnowledgeBase(), single, 1), 1)
    : none;
  const parallel = forms.has("in-flight")
    ? report(`one per request, ${inFlight} in flight`, await drive(await freshKnowledgeBase(), single, inFlight), 1)
    : none;
  let batched = none;
  try {
    if (forms.has("batches"))
      report(`batches of ${batchSize}, in sequence`, await drive(await freshKnowledgeBase(), batches, 1), batchSize);
    if (forms.has("batches-in-flight"))
      batched = report(
        `batches of ${batchSize}, ${inFlight} in flight`,
        await drive(await freshKnowledgeBase(), batches, inFlight),
        batchSize,
      );
  } catch (error) {
    console.log(`batch form: ${error.message.slice(0, 200)}`);
  }
  const mark = (ok) => (ok ? "met" : "MISSED");
  console.log(
    `targets: ${inFlight} in flight >= 500 documents/s ${mark(parallel.perSecond >= 500)} (${parallel.perSecond.toFixed(0)}), batches >= 2000 documents/s ${mark(batched.perSecond >= 2000)} (${batched.perSecond.toFixed(0)}), sequence p50 <= 10 ms ${mark(sequence.p50 <= 10)} (${sequence.p50.toFixed(1)})`,
  );
  return rows;
}
