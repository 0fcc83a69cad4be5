// `npm run dev`: Loom under `wrangler dev`, which rebuilds and reloads the Worker when a source file
// changes (for people editing Loom). Same bindings and the same .wrangler/state as `npm start`, but
// every request passes wrangler's reload proxy (~3.5 ms more per request; see BENCHMARKS.md).
// 1. creates .dev.vars with random local secrets if there is none,
// 2. applies the D1 migrations to local state (.wrangler/state, kept across restarts),
// 3. starts `wrangler dev` on 127.0.0.1:8787; extra arguments pass through (`npm run dev -- --port 9000`).
import { spawnSync, spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";

const devVars = new URL("../.dev.vars", import.meta.url);
if (!existsSync(devVars)) {
  const secret = () => randomBytes(32).toString("hex");
  writeFileSync(
    devVars,
    `# Local secrets for npm start and npm run dev; generated once, never committed.\nJWT_SECRET=${secret()}\nENCRYPTION_KEY=${secret()}\n`,
    { mode: 0o600 },
  );
  console.log("created .dev.vars with fresh local secrets");
}

const wrangler = new URL("../node_modules/wrangler/bin/wrangler.js", import.meta.url).pathname;
const migrate = spawnSync(process.execPath, [wrangler, "d1", "migrations", "apply", "DB", "--local"], {
  stdio: "inherit",
  env: { ...process.env, CI: "true" },
});
if (migrate.status !== 0) process.exit(migrate.status ?? 1);

const extra = process.argv.slice(2);
const has = (flag) => extra.some((arg) => arg === flag || arg.startsWith(`${flag}=`));
const args = [
  wrangler,
  "dev",
  ...(has("--ip") ? [] : ["--ip", "127.0.0.1"]),
  ...(has("--port") ? [] : ["--port", "8787"]),
  ...extra,
];
const child = spawn(process.execPath, args, { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 0));
