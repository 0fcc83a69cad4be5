import { describe, expect, it } from "vitest";
import { IngestBatcher } from "../../src/features/knowledge-bases/index/ingest-batcher";

// Issue 14, sixth round: the index object's group commit waits for a batch's answer (its D1 write)
// before starting the next batch, so the calls that arrive meanwhile share one batch's fixed costs.

/** Settles after `n` chained microtasks: a write still in flight when the batcher's loop resumes. */
const afterTicks = (n: number): Promise<void> =>
  n === 0 ? Promise.resolve() : Promise.resolve().then(() => afterTicks(n - 1));

describe("knowledge bases: the index object's group commit (IngestBatcher)", () => {
  it("starts no batch while the previous batch's answer is pending, and writes the calls that arrived meanwhile together", async () => {
    const batches: { jobs: string[]; unsettledBefore: number }[] = [];
    let unsettled = 0;
    const later: Promise<string[]>[] = [];
    const batcher = new IngestBatcher<string, string>(
      async (jobs) => {
        batches.push({ jobs, unsettledBefore: unsettled });
        // Two calls arrive while the first batch is being written (after its transaction).
        if (jobs[0] === "a") later.push(batcher.submit(["b"]), batcher.submit(["c", "d"]));
        unsettled += 1;
        const answer = afterTicks(jobs[0] === "a" ? 50 : 0).then(() => {
          unsettled -= 1;
          return jobs.map((j) => `${j}!`);
        });
        return { answer };
      },
      () => 1,
      100,
    );
    const first = await batcher.submit(["a"]);
    expect(first).toEqual(["a!"]);
    expect(await Promise.all(later)).toEqual([["b!"], ["c!", "d!"]]);
    expect(batches).toEqual([
      { jobs: ["a"], unsettledBefore: 0 },
      { jobs: ["b", "c", "d"], unsettledBefore: 0 },
    ]);
  });

  it("writes calls submitted in the same turn as one batch", async () => {
    const batches: string[][] = [];
    const batcher = new IngestBatcher<string, string>(
      async (jobs) => {
        batches.push(jobs);
        return { answer: Promise.resolve(jobs.map((j) => `${j}!`)) };
      },
      () => 1,
      100,
    );
    const answers = await Promise.all([batcher.submit(["a"]), batcher.submit(["b", "c"]), batcher.submit(["d"])]);
    expect(answers).toEqual([["a!"], ["b!", "c!"], ["d!"]]);
    expect(batches).toEqual([["a", "b", "c", "d"]]);
  });

  it("answers a failed batch's callers with its error and goes on with the next", async () => {
    const batches: string[][] = [];
    let good: Promise<string[]> | undefined;
    const batcher = new IngestBatcher<string, string>(
      async (jobs) => {
        batches.push(jobs);
        // A call arriving while the failing batch is written goes in the next batch, unharmed.
        if (jobs[0] === "bad") good = batcher.submit(["good"]);
        const answer =
          jobs[0] === "bad" ? Promise.reject(new Error("D1 said no")) : Promise.resolve(jobs.map((j) => `${j}!`));
        return { answer };
      },
      () => 1,
      100,
    );
    await expect(batcher.submit(["bad"])).rejects.toThrow("D1 said no");
    expect(await good).toEqual(["good!"]);
    expect(batches).toEqual([["bad"], ["good"]]);
  });
});

describe("knowledge bases: the group commit's gather window (IngestBatcher)", () => {
  const echo = (batches: string[][]) => async (jobs: string[]) => {
    batches.push(jobs);
    return { answer: Promise.resolve(jobs.map((j) => `${j}!`)) };
  };
  /** Resolves after the event loop's next turn, so a call arrives while the batcher is gathering. */
  const laterTurn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

  it("waits for as many callers as the largest recent batch held, however late they come, then writes them together", async () => {
    const batches: string[][] = [];
    // A window no test run reaches: the second batch can only be written once its third caller is here.
    const batcher = new IngestBatcher<string, string>(echo(batches), () => 1, 100, 600_000);
    await Promise.all([batcher.submit(["a"]), batcher.submit(["b"]), batcher.submit(["c"])]);
    const x = batcher.submit(["x"]);
    await laterTurn();
    await laterTurn();
    const y = batcher.submit(["y"]);
    await laterTurn();
    const z = batcher.submit(["z"]);
    expect(await Promise.all([x, y, z])).toEqual([["x!"], ["y!"], ["z!"]]);
    expect(batches).toEqual([
      ["a", "b", "c"],
      ["x", "y", "z"],
    ]);
  });

  it("never waits for a lone caller (requests in sequence)", async () => {
    const batches: string[][] = [];
    const batcher = new IngestBatcher<string, string>(echo(batches), () => 1, 100, 600_000);
    // With the window above, any wait would outlast the test's timeout.
    for (const name of ["p", "q", "r"]) expect(await batcher.submit([name])).toEqual([`${name}!`]);
    expect(batches).toEqual([["p"], ["q"], ["r"]]);
  });

  it("writes the callers that came once the window has passed when the others do not come", async () => {
    const batches: string[][] = [];
    const batcher = new IngestBatcher<string, string>(echo(batches), () => 1, 100, 5);
    await Promise.all([batcher.submit(["a"]), batcher.submit(["b"])]);
    expect(await batcher.submit(["alone"])).toEqual(["alone!"]);
    expect(batches).toEqual([["a", "b"], ["alone"]]);
  });
});
