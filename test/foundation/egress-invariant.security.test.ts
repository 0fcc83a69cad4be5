/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";

/**
 * ARCHITECTURE: "Every outbound request goes through one egress function with the SSRF guard;
 * nothing else calls `fetch` with a user-influenced URL." Read from the source itself, so a new
 * `fetch(` anywhere in src fails here until it goes through egressFetch.
 */
const sources = import.meta.glob("../../src/**/*.ts", { query: "?raw", import: "default", eager: true }) as Record<
  string,
  string
>;

/** Calls of the global fetch: `fetch(` not preceded by `.` or a word character (so `x.fetch(` and `prefetch(` are not). */
const GLOBAL_FETCH = /(^|[^.\w$])fetch\s*\(/;

/** Files whose `fetch(` is not the Worker calling out, and why. */
const NOT_OUTBOUND: Record<string, RegExp> = {
  // The API reference page's script runs in the reader's browser, against this same server.
  "../../src/features/docs/docs-page.ts": /fetch\(/,
};

/** A fetch *handler* being defined (a Dynamic Worker guest's entry point, npm start's LoomHttp entrypoint), not a call. */
const HANDLER_DEFINITION = /^\s*(override\s+)?(async\s+)?fetch\(\w+: Request\)(:|\s*\{)/;

describe("egress: one function sends every outbound request", () => {
  it("no module but src/lib/egress.ts calls the global fetch", () => {
    expect(Object.keys(sources).length).toBeGreaterThan(50);
    const offenders: string[] = [];
    for (const [path, text] of Object.entries(sources)) {
      // The sandbox's generated guest bundle runs in a Dynamic Worker with no network (globalOutbound null).
      if (path === "../../src/lib/egress.ts" || path.includes("/generated/")) continue;
      text.split("\n").forEach((line, index) => {
        if (!GLOBAL_FETCH.test(line) || line.trim().startsWith("*") || line.trim().startsWith("//")) return;
        if (NOT_OUTBOUND[path]?.test(line) || HANDLER_DEFINITION.test(line)) return;
        offenders.push(`${path.replace("../../", "")}:${index + 1}: ${line.trim().slice(0, 160)}`);
      });
    }
    expect(offenders).toEqual([]);
    expect(sources["../../src/lib/egress.ts"]).toMatch(GLOBAL_FETCH);
  });
});
