// Shared by the bench sections (scripts/bench/*.mjs): one percentile rule, one timing loop and the server CPU reading,
// so every section's p50/p99 means the same thing.
import { readFileSync } from "node:fs";

/** The nearest-rank percentile of ascending samples: the smallest value with at least p% of samples at or below it. */
export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Runs `fn` `warmup` times untimed, then `runs` times one after another; p50 and p99 in ms. */
export async function measureLatency(fn, { warmup, runs }) {
  for (let i = 0; i < warmup; i++) await fn();
  const samples = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** CPU seconds (user + system) a process (a bench's server, `--server-pid`) has used, from /proc (Linux); null elsewhere. */
export function cpuSeconds(pid) {
  if (!pid) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}
