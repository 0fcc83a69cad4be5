import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { buildSync } from "esbuild";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { fileURLToPath } from "node:url";
import { availableParallelism } from "node:os";

// wrangler's informational lines ("Using secrets defined in .dev.vars", once per test file) are noise
// in a test run; its warnings still show. WRANGLER_LOG=info brings them back.
process.env.WRANGLER_LOG ??= "warn";

const migrations = await readD1Migrations(fileURLToPath(new URL("./migrations", import.meta.url)));

const bindings = {
  TEST_MIGRATIONS: migrations,
  // Test-only secrets; real deployments set their own with `wrangler secret put`.
  JWT_SECRET: "test-jwt-secret-0123456789abcdef",
  ENCRYPTION_KEY: "test-encryption-key-0123456789abcdef",
  // The local model servers the tests' connections name, listed as an operator running Ollama would
  // list theirs: fake servers (reached through FakeNetwork, never the network), a loopback Ollama
  // port, and a loopback port nothing listens on. Every other private address is still refused,
  // which test/providers/egress.security.test.ts checks.
  // One log line per request would bury the test report; tests that check logging raise it with
  // callWith({ LOG_LEVEL: "info" }). `LOG_LEVEL=info npm test` shows every line.
  LOG_LEVEL: process.env.LOG_LEVEL ?? "off",
  ALLOW_PRIVATE_MODEL_HOSTS:
    "ollama.internal:11434,tei.internal,flaky.internal,slow.internal,llm.internal,127.0.0.1:11434,127.0.0.1:9",
};

/**
 * Every test signs up and logs in from the same (untrusted, so shared) client, and may poll with
 * one key: the per-client, per-key and per-organization limits are lifted here so that ordinary
 * tests never meet them. The per-account login limits keep wrangler.toml's values (each test has
 * its own accounts). Security tests prove each 429 by binding TEST_TIGHT_LIMITER in its place.
 */
const generous = (namespace_id: string) => ({ namespace_id, simple: { limit: 1_000_000, period: 60 as const } });
const ratelimits = {
  LOGIN_CLIENT_LIMITER: generous("1003"),
  SIGNUP_LIMITER: generous("1004"),
  API_KEY_LIMITER: generous("1005"),
  SANDBOX_LIMITER: generous("1006"),
  TEST_TIGHT_LIMITER: { namespace_id: "9001", simple: { limit: 3, period: 60 as const } },
};

/** The fake Vectorize binding, bundled into a Worker the `vectorize` project binds as VECTORIZE. */
function fakeVectorizeWorker(): string {
  const built = buildSync({
    entryPoints: [fileURLToPath(new URL("./test/knowledge-bases/fake-vectorize-worker.ts", import.meta.url))],
    bundle: true,
    format: "esm",
    platform: "neutral",
    external: ["cloudflare:*"],
    write: false,
    logLevel: "warning",
  });
  return built.outputFiles[0].text;
}

/** The fake web (test/knowledge-bases/fake-web-worker.ts), bound as WEB_FETCHER and, for publishing pages, FAKE_WEB. */
function fakeWebWorker() {
  const built = buildSync({
    entryPoints: [fileURLToPath(new URL("./test/knowledge-bases/fake-web-worker.ts", import.meta.url))],
    bundle: true,
    format: "esm",
    platform: "neutral",
    external: ["cloudflare:*"],
    write: false,
    logLevel: "warning",
  });
  return { name: "fake-web", modules: true, script: built.outputFiles[0].text, compatibilityDate: "2026-11-01" };
}
const fakeWebBindings = {
  WEB_FETCHER: { name: "fake-web", entrypoint: "FakeWeb" },
  FAKE_WEB: { name: "fake-web", entrypoint: "FakeWebControl" },
};

/**
 * workerd's own "uncaught exception" lines: the durability tests crash Durable Objects on purpose
 * (state.abort("simulated crash")), and workerd then reports each broken output gate, unlabelled,
 * on stderr. What a test must notice fails its assertions; the lines only buried the report.
 * WORKERD_VERBOSE=1 npm test shows them again.
 */
const verbose = process.env.WORKERD_VERBOSE === "1";

/**
 * The Worker the tests run: src/index.ts's app and objects built with the implementations each test
 * file chooses (test/worker.ts, test/test-deps.ts), so no test swaps a module global in src/.
 */
const TEST_ENTRY = "./test/worker.ts";

/**
 * Files that get a workerd of their own: the hostile-PDF test in knowledge-bases.security (pdf.js in
 * the parser's Dynamic Worker, up to its CPU limit) ran 2-4 s in a fresh runtime but passed its 30 s
 * timeout after the sandbox and hostile-body suites had run in the same one (measured at load ~13).
 */
const FRESH_RUNTIME = ["test/knowledge-bases/knowledge-bases.security.test.ts"];

/**
 * `isolate: false`: a pool worker (one Miniflare, one workerd) runs test file after test file instead
 * of being started afresh for each of the 67 files, and keeps the Worker's modules (and what they
 * build once: compiled wasm, the embedding table) loaded. Starting workerd and evaluating the app
 * again per file was most of `npm test`'s time. Files stay independent: each seeds its own
 * organization with unique names (test/helpers.ts), and a worker runs one file at a time.
 */
const common = { setupFiles: ["./test/setup.ts"], testTimeout: 30_000, hookTimeout: 30_000, isolate: false };

/**
 * One test file per core at a time, across projects. vitest's default (cores - 1) gave a 2-core
 * machine ONE worker: every file, then every project, ran one after another while the second core
 * idled. The vitest process itself mostly waits (each `loom` worker is a workerd process doing the
 * work), so a worker per core keeps both busy: the `loom` files share two workerds, and `client`,
 * `loom-fresh` and `vectorize` run beside them instead of after them. `--maxWorkers=1` on the
 * command line still runs everything in one.
 */
const maxWorkers = Math.max(2, availableParallelism());

/**
 * vitest sorts projects by name (client, loom, loom-fresh, vectorize), so the two long single-file
 * suites (loom-fresh's, vectorize's) started only after the last `loom` file and ran alone at the
 * end. Here the projects with few, long files go first and `loom`'s many short files fill the cores
 * up to the end; within a project the order stays vitest's (slowest first, by the last run's
 * durations). Array sort is stable, so only the project order changes.
 */
const PROJECT_ORDER = ["client", "loom-fresh", "vectorize", "loom"];
class FewLongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification): number => {
      const index = PROJECT_ORDER.indexOf(spec.project.name);
      return index === -1 ? PROJECT_ORDER.length : index;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    maxWorkers,
    sequence: { sequencer: FewLongFilesFirst },
    projects: [
      {
        plugins: [
          cloudflareTest({
            main: TEST_ENTRY,
            verbose,
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings, ratelimits, serviceBindings: fakeWebBindings, workers: [fakeWebWorker()] },
          }),
        ],
        test: { name: "loom", include: ["test/**/*.test.ts"], exclude: FRESH_RUNTIME, ...common },
      },
      {
        plugins: [
          cloudflareTest({
            main: TEST_ENTRY,
            verbose,
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings, ratelimits, serviceBindings: fakeWebBindings, workers: [fakeWebWorker()] },
          }),
        ],
        test: { name: "loom-fresh", include: FRESH_RUNTIME, ...common, isolate: true },
      },
      {
        // The knowledge-base suites again, with vectors in a Vectorize index (KB_VECTOR_BACKEND =
        // "vectorize") instead of Loom's own: the production option, end to end through the Worker.
        plugins: [
          cloudflareTest({
            main: TEST_ENTRY,
            verbose,
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: { ...bindings, KB_VECTOR_BACKEND: "vectorize" },
              ratelimits,
              serviceBindings: { VECTORIZE: { name: "fake-vectorize", entrypoint: "FakeVectorizeBinding" } },
              workers: [
                {
                  name: "fake-vectorize",
                  modules: true,
                  script: fakeVectorizeWorker(),
                  compatibilityDate: "2026-11-01",
                },
              ],
            },
          }),
        ],
        // The sharded suites too: a sharded base's vector half is Vectorize's matches mapped shard by shard.
        // Not sharding-exact (~70 s): its rankings are pinned on Loom's own index, and the suite must stay fast.
        test: {
          name: "vectorize",
          include: [
            "test/knowledge-bases/knowledge-bases.*.test.ts",
            "test/knowledge-bases/sharding.test.ts",
            "test/knowledge-bases/sharding-partial.test.ts",
          ],
          ...common,
        },
      },
      {
        // The generated-client check, in Node: Loom started as `npm start` starts it, its live
        // /openapi.json through openapi-typescript, and a sample client type-checked and run.
        test: {
          name: "client",
          include: ["test-client/**/*.test.ts"],
          environment: "node",
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
