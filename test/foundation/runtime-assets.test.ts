import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { PARSER_ASSET } from "../../src/features/knowledge-bases/parsing/generated/parser-bundle";
import { AppError } from "../../src/lib/errors";
import { runtimeAsset } from "../../src/lib/runtime-assets";
import { STATIC_TABLE_ASSET, STATIC_TABLE_BYTES } from "../../src/providers/generated/static-use-asset";
import { call } from "../helpers";

/**
 * The embedding table and the parser's module are static assets read on first use (so the Worker
 * bundle stays under the free plan's 3 MB gzipped; BENCHMARKS.md, "Deploy size").
 */
describe("runtime assets", () => {
  it("reads the embedding table and the parser module through ASSETS, once per isolate", async () => {
    const table = await runtimeAsset(env, STATIC_TABLE_ASSET);
    expect(table.byteLength).toBe(STATIC_TABLE_BYTES);
    expect(await runtimeAsset(env, STATIC_TABLE_ASSET)).toBe(table);
    const parser = new TextDecoder().decode(await runtimeAsset(env, PARSER_ASSET));
    expect(parser).toContain("export{");
    expect(parser.length).toBeGreaterThan(1_000_000);
  });

  it("the Worker serves none of them to clients: /_loom/ is not a route", async () => {
    for (const path of [STATIC_TABLE_ASSET, PARSER_ASSET, "/_loom/"]) {
      const response = await call(path);
      expect(response.status, path).toBe(404);
      expect(response.headers.get("content-type")).toContain("application/json");
      expect(await response.text()).not.toContain("pdf");
    }
  });

  it("a deployment without its assets says which one is missing and how to build it, and tries again later", async () => {
    await expect(runtimeAsset({ ASSETS: undefined }, "/_loom/nothing.bin")).rejects.toThrow(
      "Loom's static assets are not bound (ASSETS, wrangler.toml [assets])",
    );
    const missing = runtimeAsset(env, "/_loom/not-built.bin");
    await expect(missing).rejects.toBeInstanceOf(AppError);
    await expect(missing).rejects.toThrow(
      "static asset /_loom/not-built.bin is missing (404); run npm run build before deploying",
    );
    // A failure is not cached: the same path is fetched again on the next call.
    expect(runtimeAsset(env, "/_loom/not-built.bin")).not.toBe(missing);
    await expect(runtimeAsset(env, "/_loom/not-built.bin")).rejects.toThrow("missing");
    await expect(runtimeAsset(env, "/docs/loom-docs.js")).rejects.toThrow("runtime assets live under /_loom/");
  });
});
