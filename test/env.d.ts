import type { D1Migration } from "cloudflare:test";
import type { Env as LoomEnv } from "../src/env";

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import("./worker");
    }
    interface Env extends LoomEnv {
      TEST_MIGRATIONS: D1Migration[];
      /** A rate limit of 3 a minute (vitest.config.ts), bound in place of a real one to prove its 429. */
      TEST_TIGHT_LIMITER: RateLimit;
      /** Publishes pages on the fake web that WEB_FETCHER serves (test/knowledge-bases/fake-web-worker.ts). */
      FAKE_WEB: Service<import("./knowledge-bases/fake-web-worker").FakeWebControl>;
    }
  }
}
