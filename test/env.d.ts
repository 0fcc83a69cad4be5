import type { D1Migration } from "cloudflare:test";
import type { Env as LoomEnv } from "../src/env";

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import("../src/index");
    }
    interface Env extends LoomEnv {
      TEST_MIGRATIONS: D1Migration[];
    }
  }
}
