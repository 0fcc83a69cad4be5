import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { create, placedAt, run } from "./fixtures";

const BUDGET = "transformation exceeded its instruction budget";
const DROPPED = "[more output dropped: a run keeps 100 lines, 16384 bytes]";
const CUT = `${"x".repeat(1_000)}...`;

describe("transformations: output is charged by the byte and dropped past its cap", () => {
  it("Python: 20 MB printed fits the default budget (30 million units), 40 MB does not", async () => {
    const org = await seedOrg();
    const flood = (megabytes: number) =>
      create(org.owner, {
        function_name: "f",
        function: `def f():\n    s = 'x' * 1_000_000\n    for i in range(${megabytes}):\n        print(s)\n    return {'done': True}\n`,
      });
    // About one unit per byte written, so the budget, not the time it takes, ends the flood.
    expect(await run(org.owner, await flood(40), {})).toEqual({
      status: 400,
      body: { status: "failed", error: BUDGET },
    });
    const fits = await run(org.owner, await flood(20), {});
    expect(fits.status, JSON.stringify(fits.body).slice(0, 300)).toBe(200);
    // Each line is cut at 1,000 characters and the log stops at 16 KiB: 17 lines, then the notice.
    expect(fits.body).toEqual({ status: "success", result: { done: true }, logs: [...Array(17).fill(CUT), DROPPED] });
  });

  it("Python: eight prints of 8 MB end with the budget error, not after seconds of copying", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "f",
      function: "def f():\n    s = 'x' * 8_000_000\n    for i in range(8):\n        print(s)\n    return {}\n",
    });
    expect(await run(org.owner, id, {})).toEqual({ status: 400, body: { status: "failed", error: BUDGET } });
  });

  it("JavaScript: console output is formatted and capped inside the interpreter; only the kept lines come out", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function:
        "function f() { const s = 'x'.repeat(8_000_000); for (let i = 0; i < 200; i++) console.log(s); return { done: true }; }",
    });
    expect(await run(org.owner, id, {})).toEqual({
      status: 200,
      body: { status: "success", result: { done: true }, logs: [...Array(17).fill(CUT), DROPPED] },
    });
  });
});

describe("transformations: a run has a hard wall-clock limit in a Dynamic Worker", () => {
  for (const [language, source] of [
    ["python", "def f():\n    while True:\n        pass\n"],
    ["javascript", "function f() { for (;;) {} }"],
  ] as const) {
    it(`${language}: a run past SANDBOX_TIMEOUT_MS ends with the time-limit error`, async () => {
      const org = await seedOrg();
      const id = await create(org.owner, { function_name: "f", language, function: source });
      // 1 ms: the loop (bounded by fuel, some hundreds of milliseconds) is certainly past it.
      expect(await placedAt({ SANDBOX_TIMEOUT_MS: "1" }).run(org.owner, id, {})).toEqual({
        status: 400,
        body: { status: "failed", error: "transformation exceeded its time limit of 1 ms" },
      });
      // The default limit leaves the same run to fuel.
      expect(await run(org.owner, id, {})).toEqual({ status: 400, body: { status: "failed", error: BUDGET } });
    });
  }
});
