import type { Env } from "../env";
import { AppError } from "./errors";

/**
 * Large build outputs the Worker needs only on first use (the offline embedding table, the PDF
 * parser's Dynamic Worker module) are deployed as static assets under /_loom/ instead of inside
 * the Worker bundle, which keeps the upload under the free plan's 3 MB (gzipped). They are public
 * code and data built from pinned npm packages, never secrets. They are read through the ASSETS
 * binding (a local call, never the network) and kept for the isolate's life.
 */
export const RUNTIME_ASSET_PREFIX = "/_loom/";

const cache = new Map<string, Promise<ArrayBuffer>>();

/** The bytes of one runtime asset (a path under /_loom/), fetched once per isolate. */
export function runtimeAsset(env: Pick<Env, "ASSETS">, path: string): Promise<ArrayBuffer> {
  const cached = cache.get(path);
  if (cached) return cached;
  const loading = fetchAsset(env, path);
  cache.set(path, loading);
  // A failed read is not kept: the next request tries again.
  loading.catch(() => cache.delete(path));
  return loading;
}

async function fetchAsset(env: Pick<Env, "ASSETS">, path: string): Promise<ArrayBuffer> {
  if (!path.startsWith(RUNTIME_ASSET_PREFIX))
    throw new Error(`runtime assets live under ${RUNTIME_ASSET_PREFIX}: ${path}`);
  if (!env.ASSETS)
    throw new AppError(
      "unavailable",
      `Loom's static assets are not bound (ASSETS, wrangler.toml [assets]); ${path} is read from them`,
    );
  const response = await env.ASSETS.fetch(new Request(`https://assets.local${path}`));
  if (!response.ok) {
    await response.body?.cancel();
    throw new AppError(
      "unavailable",
      `static asset ${path} is missing (${response.status}); run npm run build before deploying`,
    );
  }
  return response.arrayBuffer();
}
