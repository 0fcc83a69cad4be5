import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { runSandboxed, DEFAULT_LIMITS } from "../../src/sandbox/sandbox";
import { runTask } from "../../src/sandbox/engine";
import quickjs from "../../src/sandbox/generated/quickjs.wasm";
import micropython from "../../src/sandbox/generated/micropython.wasm";

const run = (language: "javascript" | "python", source: string, fn: string, inputs: unknown) =>
  ({ kind: "run" as const, language, source, functionName: fn, inputsJson: JSON.stringify(inputs), limits: DEFAULT_LIMITS });

describe("spike", () => {
  it("inline", async () => {
    const t0 = Date.now();
    console.log(await runTask(run("javascript", "function double({x}){ return {y: x*2} }", "double", { x: 2 }), { quickjs, micropython }), Date.now() - t0);
    console.log(await runTask(run("python", "def double(x):\n    return {'y': x*2}\n", "double", { x: 2 }), { quickjs, micropython }), Date.now() - t0);
    console.log(await runTask(run("javascript", "function f(){ while(true){} }", "f", {}), { quickjs, micropython }), Date.now() - t0);
    console.log(await runTask(run("python", "def f():\n    while True: pass\n", "f", {}), { quickjs, micropython }), Date.now() - t0);
    console.log(await runTask(run("python", "def double(x):\n    return {'y': x*2}\n", "double", { x: 2 }), { quickjs, micropython }), Date.now() - t0);
  });
  it("loader", async () => {
    console.log("has loader", !!env.LOADER);
    const t0 = Date.now();
    console.log(await runSandboxed(env, run("javascript", "function double({x}){ return {y: x*2} }", "double", { x: 2 })), Date.now() - t0);
    console.log(await runSandboxed(env, run("python", "def double(x):\n    return {'y': x*2}\n", "double", { x: 2 })), Date.now() - t0);
    console.log(await runSandboxed(env, run("javascript", "function f(){ while(true){} }", "f", {})), Date.now() - t0);
    console.log(await runSandboxed(env, run("python", "def f():\n    while True: pass\n", "f", {})), Date.now() - t0);
    console.log(await runSandboxed(env, run("python", "import js\ndef f():\n    return {'a': str(js.fetch)}\n", "f", {})), Date.now() - t0);
  });
});
