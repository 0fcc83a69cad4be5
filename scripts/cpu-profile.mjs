// CPU profile of a running `npm start -- --inspector-port N`: samples workerd's V8 isolates through
// the inspector while you run a bench elsewhere, then prints where the CPU went.
//
//   npm run profile -- --inspector-port=9229 --seconds=20 [--out=profile.cpuprofile] [--top=40]
//
// By default only Loom's own isolate (its Worker and Durable Objects: `core:user:loom`) is sampled;
// --target=SUBSTRING picks others by inspector id (`d1:db` is Miniflare's local D1, `all` every
// isolate). Every isolate shares workerd's one thread, so sampling several at once distorts them
// (each profiler may charge another isolate's time to its last frame): compare an isolate's busy
// time with workerd's CPU (`--server-pid` in the benches) rather than adding isolates up. For each
// isolate: the functions with the most self time, and the most inclusive time (a function counted
// once per sample however deep it recurses). The raw profiles (Chrome DevTools' .cpuprofile
// format) are written with --out for a closer look.
import { writeFileSync } from "node:fs";

const args = Object.fromEntries(
  process.argv.slice(2).map((arg) => {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match) throw new Error(`unknown argument ${arg}`);
    return [match[1], match[2] ?? "true"];
  }),
);
const port = Number(args["inspector-port"] ?? 9229);
const seconds = Number(args.seconds ?? 20);
const top = Number(args.top ?? 40);
const interval = Number(args["interval-us"] ?? 250);
const wanted = args.target ?? "core:user";

const listed = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const targets = listed.filter((target) => wanted === "all" || String(target.id).includes(wanted));
if (targets.length === 0) throw new Error(`the inspector lists no isolate matching ${wanted}`);

/** Opens one target's socket and returns a `send(method, params)` that resolves to the result. */
async function connect(url) {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve, { once: true });
    socket.addEventListener("error", reject, { once: true });
  });
  let next = 1;
  const waiting = new Map();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data));
    const pending = waiting.get(message.id);
    if (!pending) return;
    waiting.delete(message.id);
    if (message.error) pending.reject(new Error(JSON.stringify(message.error)));
    else pending.resolve(message.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => socket.close() };
}

const sessions = [];
for (const target of targets) {
  const session = await connect(target.webSocketDebuggerUrl);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval });
  await session.send("Profiler.start");
  sessions.push({ target, session });
}
console.log(`sampling ${sessions.length} isolate(s) every ${interval} us for ${seconds} s ...`);
await new Promise((resolve) => setTimeout(resolve, seconds * 1000));

const saved = {};
for (const { target, session } of sessions) {
  const { profile } = await session.send("Profiler.stop");
  session.close();
  saved[target.title ?? target.id] = profile;
  report(target.title ?? target.id, profile);
}
if (args.out) {
  writeFileSync(args.out, JSON.stringify(saved));
  console.log(`raw profiles: ${args.out}`);
}
process.exit(0);

/** Prints the top functions by self and by inclusive sampled time. */
function report(name, profile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const deltas = profile.timeDeltas;
  const selfMs = new Map();
  const totalMs = new Map();
  let busy = 0;
  let all = 0;
  const label = (node) => {
    const frame = node.callFrame;
    const file = frame.url ? frame.url.split("/").pop() : "";
    return `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`;
  };
  for (let i = 0; i < profile.samples.length; i++) {
    const ms = (deltas[i + 1] ?? 0) / 1000;
    all += ms;
    const node = byId.get(profile.samples[i]);
    const name0 = node.callFrame.functionName;
    if (name0 === "(idle)" || name0 === "(program)") continue;
    busy += ms;
    const own = label(node);
    selfMs.set(own, (selfMs.get(own) ?? 0) + ms);
    const seen = new Set();
    for (let id = node.id; id !== undefined; id = parent.get(id)) {
      const key = label(byId.get(id));
      if (seen.has(key)) continue;
      seen.add(key);
      totalMs.set(key, (totalMs.get(key) ?? 0) + ms);
    }
  }
  if (busy < 1) return;
  console.log(`\n== ${name}: ${busy.toFixed(0)} ms busy of ${all.toFixed(0)} ms sampled`);
  const print = (title, map) => {
    console.log(`-- ${title}`);
    for (const [key, ms] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${ms.toFixed(1).padStart(9)} ms ${((100 * ms) / busy).toFixed(1).padStart(5)}%  ${key}`);
  };
  print("self", selfMs);
  print("inclusive", totalMs);
}
