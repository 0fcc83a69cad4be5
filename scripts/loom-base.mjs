// The one way smoke, bench and eval:retrieval are told where Loom is: `--base=URL` (or `--base URL`),
// default the address `npm start` serves. Shared so the three scripts cannot drift apart again.
export const DEFAULT_BASE = "http://127.0.0.1:8787";

/** Reads `--base` from argv (both spellings); returns the URL without a trailing slash and argv without it. */
export function takeBase(argv, script) {
  const rest = [];
  let base = DEFAULT_BASE;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--base") {
      base = argv[++i] ?? "";
    } else if (arg.startsWith("--base=")) {
      base = arg.slice("--base=".length);
    } else if (/^https?:\/\//.test(arg)) {
      // The old spelling (a bare URL) is refused rather than silently ignored.
      console.error(`${script}: give the server as --base=${arg}`);
      process.exit(2);
    } else {
      rest.push(arg);
    }
  }
  if (!/^https?:\/\/[^/]+/.test(base)) {
    console.error(`${script}: --base must be an http(s) URL, got "${base}"`);
    process.exit(2);
  }
  return { base: base.replace(/\/+$/, ""), rest };
}

/** Exits with a sentence a person can act on when nothing answers at `base` (rather than "fetch failed"). */
export async function requireLoom(base, script) {
  try {
    await fetch(`${base}/`, { signal: AbortSignal.timeout(5000) });
  } catch {
    console.error(`${script}: no Loom at ${base}; start it with npm start (or pass --base=URL)`);
    process.exit(1);
  }
}
