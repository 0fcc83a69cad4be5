// `npm start`: runs Loom locally on workerd with local D1, R2 and Durable Objects, offline.
//
// Why not `wrangler dev`: it puts a proxy (a second workerd plus Node) in front of the Worker so it
// can live-reload; every request pays ~3.5 ms for that hop. Here Miniflare starts ONE workerd whose
// own entry socket is the port you call. Live reload stays available as `npm run dev`.
//
// 1. creates .dev.vars with random local secrets if there is none (never printed),
// 2. applies the D1 migrations to local state with `wrangler d1 migrations apply DB --local`,
// 3. bundles the Worker the way a deploy does (`wrangler deploy --dry-run`, offline) into
//    .wrangler/start/,
// 4. serves it with Miniflare on 127.0.0.1:8787 (`npm start -- --port 9000 --ip 0.0.0.0`), that
//    port leading straight into the Worker (see DIRECT_ENTRYPOINT below).
// Bindings come from wrangler.toml through wrangler's own reader, and state lives in
// .wrangler/state/v3 — the same place `wrangler dev` and the migrations command use.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import path from "node:path";

// wrangler's own informational lines ("Using secrets defined in .dev.vars") are noise here; its
// warnings and errors still show. WRANGLER_LOG=info (or debug) in the environment brings them back.
process.env.WRANGLER_LOG ??= "warn";

const root = fileURLToPath(new URL("..", import.meta.url));
const usage =
  "usage: npm start [-- --port <1-65535>] [--ip <address>] [--no-rate-limits] [--var NAME=VALUE ...] [--inspector-port <port>]\n  defaults: --port 8787 --ip 127.0.0.1, with wrangler.toml's rate limits";

/** Reads --port/--ip (as `--port 9000` or `--port=9000`); anything else is refused, not ignored. */
function parseArgs(argv) {
  const out = { port: 8787, ip: "127.0.0.1", rateLimits: true, vars: {} };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") {
      console.log(usage);
      process.exit(0);
    }
    // --inspector-port N opens workerd's V8 inspector on 127.0.0.1:N (CPU profiles:
    // `node scripts/cpu-profile.mjs`); off unless asked.
    if (arg === "--inspector-port" || arg.startsWith("--inspector-port=")) {
      const value = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[++i];
      const inspector = Number(value);
      if (!Number.isInteger(inspector) || inspector < 1 || inspector > 65535)
        fail(`--inspector-port must be an integer from 1 to 65535, got "${value}"`);
      out.inspectorPort = inspector;
      continue;
    }
    if (arg === "--no-rate-limits") {
      out.rateLimits = false;
      continue;
    }
    // --var NAME=VALUE overrides one [vars] entry for this run (the browser tests point
    // ALLOW_PRIVATE_MODEL_HOSTS at their fake model server this way).
    if (arg === "--var") {
      const pair = argv[++i] ?? "";
      const eq = pair.indexOf("=");
      if (eq < 1 || !/^[A-Z][A-Z0-9_]*$/.test(pair.slice(0, eq))) fail(`--var needs NAME=VALUE, got "${pair}"`);
      out.vars[pair.slice(0, eq)] = pair.slice(eq + 1);
      continue;
    }
    const match = /^--(port|ip)(?:=(.*))?$/.exec(arg);
    if (!match) fail(`unknown argument "${arg}"`);
    const value = match[2] ?? argv[++i];
    if (value === undefined || value === "") fail(`--${match[1]} needs a value`);
    if (match[1] === "port") {
      const port = Number(value);
      if (!Number.isInteger(port) || port < 1 || port > 65535)
        fail(`--port must be an integer from 1 to 65535, got "${value}"`);
      out.port = port;
    } else {
      out.ip = value;
    }
  }
  return out;
}

function fail(message, showUsage = true) {
  console.error(`npm start: ${message}${showUsage ? `\n${usage}` : ""}`);
  process.exit(2);
}

// npm puts node_modules/.bin first on PATH, so `npm start` runs the node@22 that `npm install`
// fetched (the `node` devDependency) even where the system Node is older; run by hand, say so.
if (Number(process.versions.node.split(".")[0]) < 22) {
  fail(
    `Loom's scripts need Node 22 or later (this is ${process.version}); run them through npm (npm start), which uses the node@22 in node_modules/.bin`,
    false,
  );
}

const { port, ip, rateLimits, vars, inspectorPort } = parseArgs(process.argv.slice(2));

// A taken port is reported now, not after migrating and bundling (workerd would refuse it later).
await new Promise((resolve) => {
  const probe = createServer();
  probe.once("error", (error) => {
    const reason =
      error.code === "EADDRINUSE"
        ? "is already in use; choose another with --port"
        : `cannot be listened on: ${error.message}`;
    fail(`${ip}:${port} ${reason}`, false);
  });
  probe.listen(port, ip, () => probe.close(resolve));
});

// The generated files (embedding table, metered sandbox wasm, vector kernel, parser bundle) are
// built here rather than in a `prestart` hook, so a taken port is reported before this work, and
// their ~200 lines of progress are shown only when a step fails.
const generated = await runCaptured(process.platform === "win32" ? "npm.cmd" : "npm", ["run", "--silent", "build"]);
if (generated.code !== 0) {
  process.stderr.write(generated.output);
  console.error("npm start: building the generated files failed (see above; `npm run build` repeats it)");
  process.exit(generated.code);
}

const devVars = path.join(root, ".dev.vars");
if (!existsSync(devVars)) {
  const secret = () => randomBytes(32).toString("hex");
  writeFileSync(
    devVars,
    `# Local secrets for npm start and npm run dev; generated once, never committed.\nJWT_SECRET=${secret()}\nENCRYPTION_KEY=${secret()}\n`,
    { mode: 0o600 },
  );
  console.log("created .dev.vars with fresh local secrets");
}

const wrangler = path.join(root, "node_modules/wrangler/bin/wrangler.js");

/** Runs wrangler in a child Node; resolves to its exit code and, when captured, its output. */
function runWrangler(args, { capture }) {
  return runCaptured(process.execPath, [wrangler, ...args], capture);
}

/** Runs a command with its output kept (shown by the caller only on failure) unless `capture` is false. */
function runCaptured(command, args, capture = true) {
  return new Promise((resolve) => {
    // CI=true: no interactive prompt (the migrations confirmation) and no metrics.
    const child = spawn(command, args, {
      cwd: root,
      stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit",
      env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
    });
    let output = "";
    child.stdout?.on("data", (data) => (output += data));
    child.stderr?.on("data", (data) => (output += data));
    child.on("error", (error) => resolve({ code: 1, output: `${output}${error.message}\n` }));
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output }));
  });
}

// Migrating local D1 and bundling are independent, so they run side by side (start-up time).
// The bundle is what `wrangler deploy` would upload: the same esbuild settings, module rules,
// aliases and nodejs_compat polyfills, built with no network. Its output is shown only on failure.
const outdir = path.join(root, ".wrangler/start");
rmSync(outdir, { recursive: true, force: true });
// wrangler and miniflare load (~1 s) meanwhile; only after the argument checks, so those fail fast.
const loading = Promise.all([import("wrangler"), import("miniflare")]);
const building = runWrangler(["deploy", "--dry-run", "--outdir", outdir], { capture: true });
const migrate = await runWrangler(["d1", "migrations", "apply", "DB", "--local"], { capture: true });
const build = await building;
if (migrate.code !== 0) {
  process.stderr.write(migrate.output);
  console.error("npm start: applying the D1 migrations failed (see above)");
  process.exit(migrate.code);
}
if (build.code !== 0) {
  process.stderr.write(build.output);
  console.error("npm start: bundling the Worker failed (see above)");
  process.exit(build.code);
}

const [
  { unstable_readConfig, unstable_getMiniflareWorkerOptions },
  { Miniflare, Log, LogLevel, convertV4MiniflareOptions },
] = await loading;

const config = unstable_readConfig({ config: path.join(root, "wrangler.toml") });
// Vars, secrets from .dev.vars, D1, R2, Durable Objects (SQLite), worker loaders, rate limits,
// compatibility date/flags and module rules, all as wrangler.toml declares them.
const { workerOptions } = unstable_getMiniflareWorkerOptions(config);
const { modulesRules, ...bindingOptions } = workerOptions;
bindingOptions.bindings = { ...bindingOptions.bindings, ...vars };
// Benchmarks send thousands of requests a minute with one key; without the bindings nothing is
// limited, exactly as on a deployment that does not declare them.
if (!rateLimits) {
  delete bindingOptions.ratelimits;
  console.log("rate limits are off (--no-rate-limits)");
}

// Miniflare wants the bundle as an explicit module list: index.js plus the files it imports
// (the sandbox .wasm as CompiledWasm; the embedding table and the parser module are static
// assets under public/_loom/, not modules), each typed by the first
// wrangler.toml/default rule whose glob matches, as wrangler itself types them.
function bundleModules() {
  const modules = [{ type: "ESModule", path: path.join(outdir, "index.js") }];
  for (const entry of readdirSync(outdir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.relative(outdir, path.join(entry.parentPath, entry.name)).split(path.sep).join("/");
    if (file === "index.js" || file.endsWith(".map") || file === "README.md") continue;
    const rule = (modulesRules ?? []).find((r) => r.include.some((glob) => path.matchesGlob(file, glob)));
    if (!rule) throw new Error(`no module rule in wrangler.toml matches bundled file ${file}`);
    modules.push({ type: rule.type, path: path.join(outdir, file) });
  }
  return modules;
}

/** The named entrypoint of src/index.ts that npm start's port leads to. */
const DIRECT_ENTRYPOINT = "LoomHttp";

const mf = new Miniflare(
  convertV4MiniflareOptions({
    rootPath: root,
    // Miniflare's own entry socket leads through three helper Workers (its entry Worker, the
    // assets proxy and the assets router, which with run_worker_first only pass the request on)
    // before Loom's: ~1 ms of CPU and a few hops a request. It listens on a free loopback port,
    // unused; the port you asked for is a direct socket into Loom's `LoomHttp` entrypoint
    // (src/index.ts), the same app. Lost with the helpers: response compression (pointless on
    // loopback) and the `cf` object and `cf-connecting-ip` header they add (Loom reads neither
    // unless TRUST_CLIENT_IP_HEADER names it, and then a client could write it here anyway).
    host: "127.0.0.1",
    port: 0,
    ...(inspectorPort ? { inspectorPort } : {}),
    log: new Log(LogLevel.WARN),
    // Loom never reads request.cf; the placeholder avoids a network fetch at every start.
    cf: false,
    // The Worker's own console output is shown; per-request access lines are not (they cost a
    // hop through Node on every request, the very thing this runner avoids).
    logRequests: false,
    resourcePersistencePath: path.join(root, ".wrangler/state/v3"),
    resourceTmpPath: path.join(root, ".wrangler/tmp"),
    workers: [
      {
        ...bindingOptions,
        // The worker name keys Durable Object storage (.wrangler/state/v3/do/<name>-<Class>), so
        // it must be the name wrangler dev uses: the `name` in wrangler.toml.
        name: config.name,
        modules: bundleModules(),
        modulesRoot: outdir,
        unsafeDirectSockets: [{ host: ip, port, entrypoint: DIRECT_ENTRYPOINT }],
      },
    ],
  }),
);

// Ctrl-C or a SIGTERM stops workerd (and its open Durable Objects) before Node exits, even
// while it is still starting.
let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await mf.dispose().catch(() => {});
  process.exit(0);
}
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, stop);
// Under `npm start`, a SIGTERM sent to npm alone (a process manager, `kill <npm pid>`) ends npm and
// its `sh -c`, but nobody passes it on to us: stop when that parent shell is gone rather than
// linger as an orphan holding the port.
if (process.env.npm_lifecycle_event) {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void stop();
  }, 500).unref();
}

let url;
try {
  await mf.ready;
  url = await mf.unsafeGetDirectURL(undefined, DIRECT_ENTRYPOINT);
} catch (error) {
  console.error(`npm start: workerd did not start: ${error instanceof Error ? error.message : String(error)}`);
  await mf.dispose().catch(() => {});
  process.exit(1);
}
const shown = ip === "0.0.0.0" || ip === "::" ? `http://127.0.0.1:${url.port}` : url.origin;
console.log(banner(shown));

/** What a person needs next: where Loom is, the reference, the first user and key. */
function banner(base) {
  return [
    "",
    `  Loom is running on ${base}   (Ctrl-C stops it; state lives in .wrangler/state)`,
    "",
    `  API reference   ${base}/docs            (OpenAPI document: ${base}/openapi.json)`,
    `  Chat page       ${base}/chat/<chatbot id>   once a chatbot is deployed (docs/chatbots.md)`,
    `  First user      curl -s ${base}/auth/signup -H 'content-type: application/json' \\`,
    `                    -d '{"email":"me@example.com","password":"a long password","organization":"acme"}'`,
    `  API key for /v1 POST ${base}/auth/api-keys with that access token (README.md, "A first session")`,
    `  Logs            one line per request below; LOG_LEVEL=debug|info|warn|error in .dev.vars tunes them`,
    "",
  ].join("\n");
}
