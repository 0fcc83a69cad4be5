import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createPipeline, send, uniqueName } from "./fixtures";

/** Production node services: these run the real features merged into this branch. */

const DOUBLE_JS = "function double({ x }) {\n  return { y: x * 2 };\n}\n";

async function createDouble(key: string): Promise<string> {
  const created = await send(key, "POST", "/v1/transformation", {
    name: uniqueName("double"),
    description: "doubles x",
    function_name: "double",
    function: DOUBLE_JS,
    language: "javascript",
    input_schema: { x: "number" },
    output_schema: { y: "number" },
  });
  expect(created.status).toBe(200);
  return String(created.body.id);
}

const usingTransformation = (transformationId: string) => ({
  nodes: [
    { id: "n", type: "input", config: { name: "n", type: "number" } },
    { id: "twice", type: "transformation", config: { transformation_id: transformationId, inputs: { x: "{{n}}" } } },
    { id: "out", type: "output", config: { name: "doubled", value: "{{twice.y}}" } },
  ],
  edges: [
    { source: "n", target: "twice" },
    { source: "twice", target: "out" },
  ],
});

describe("pipelines: wired to the transformations feature", () => {
  it("runs a transformation node in the sandbox", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, usingTransformation(await createDouble(key)));
    expect((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { n: 21 } })).body).toMatchObject({ status: "success", outputs: { doubled: 42 } });
  });

  it("fails the run naming the node when the transformation rejects its inputs", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const tid = await createDouble(key);
    const id = await createPipeline(key, {
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        { id: "twice", type: "transformation", config: { transformation_id: tid, inputs: { x: "{{q}}" } } },
      ],
      edges: [{ source: "q", target: "twice" }],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "not a number" } });
    expect(run.body).toMatchObject({ status: "failed", state: "failed", error: expect.stringMatching(/^node twice failed: inputs\.x/) });
  });

  it("refuses a transformation that does not exist or belongs to another organization", async () => {
    const org = await seedOrg();
    const other = await seedOrg();
    const foreign = await createDouble(other.owner.apiKey);
    for (const tid of [foreign, "0123456789abcdef01234567"]) {
      expect(await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: uniqueName(), ...usingTransformation(tid) })).toEqual({
        status: 400,
        body: { status: "failed", error: `node twice: transformation ${tid} does not exist or you cannot use it` },
      });
    }
  });

  it("says plainly that knowledge_base and llm nodes are not available until their features are", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, {
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        { id: "ask", type: "llm", config: { prompt: "{{q}}" } },
      ],
      edges: [{ source: "q", target: "ask" }],
    });
    expect((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "hi" } })).body).toMatchObject({
      status: "failed",
      error: "node ask failed: llm nodes need the model providers (chat models from connections) feature, which is not available yet on this deployment",
    });
  });
});
