import { defineConfig } from "vitest/config";

// `npm run test:browser`: the widget, the chat page and the agent page in Debian's chromium
// (playwright-core, no browser download), against Loom started as `npm start` starts it.
export default defineConfig({
  test: {
    include: ["test-browser/**/*.browser.test.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 300_000,
    fileParallelism: false,
    expect: { poll: { timeout: 15_000 } },
  },
});
