// Shared by the bench sections (scripts/bench/*.mjs): one percentile rule and one timing loop,
// so every section's p50/p99 means the same thing.

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
