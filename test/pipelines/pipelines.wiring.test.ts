import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createPipeline, send, uniqueName } from "./fixtures";

/** Production node services: these run the real features merged into this branch. */

async function createKnowledgeBase(key: string): Promise<string> {
  const created = await send(key, "POST", "/v1/knowledge-base", { name: uniqueName("kb") });
  expect(created.status).toBe(200);
  const kbId = String(created.body.id);
  const docs = {
    "whales.txt": "Whales are marine mammals. The blue whale is the largest animal known to have ever existed.",
    "bread.txt": "Sourdough bread is made by fermenting dough with wild yeast and lactobacilli.",
  };
  for (const [name, text] of Object.entries(docs)) {
    const indexed = await send(key, "POST", `/v1/knowledge-base/${kbId}/index`, {
      file_data: {
        file: {
          type: "file",
          raw_bytes: btoa(text),
          metadata: { name, mime_type: "text/plain", path: `/docs/${name}` },
        },
      },
    });
    expect(indexed.status).toBe(200);
  }
  return kbId;
}

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
    expect((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { n: 21 } })).body).toMatchObject({
      status: "success",
      outputs: { doubled: 42 },
    });
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
    expect(run.body).toMatchObject({
      status: "failed",
      state: "failed",
      error: expect.stringMatching(/^node twice failed: inputs\.x/),
    });
  });

  it("refuses a transformation that does not exist or belongs to another organization", async () => {
    const org = await seedOrg();
    const other = await seedOrg();
    const foreign = await createDouble(other.owner.apiKey);
    for (const tid of [foreign, "0123456789abcdef01234567"]) {
      expect(
        await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: uniqueName(), ...usingTransformation(tid) }),
      ).toEqual({
        status: 400,
        body: { status: "failed", error: `node twice: transformation ${tid} does not exist or you cannot use it` },
      });
    }
  });
});

describe("pipelines: wired to the provider registry", () => {
  const llmPipeline = (config: Record<string, unknown>) => ({
    nodes: [
      { id: "q", type: "input", config: { name: "q" } },
      { id: "ask", type: "llm", config: { prompt: "{{q}}", ...config } },
      { id: "out", type: "output", config: { name: "answer", value: "{{ask}}" } },
      { id: "who", type: "output", config: { name: "model", value: "{{ask.model}}" } },
    ],
    edges: [
      { source: "q", target: "ask" },
      { source: "ask", target: "out" },
      { source: "ask", target: "who" },
    ],
  });

  it("answers offline with the built-in extractive model when a node names it", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, llmPipeline({ model: "loom/extractive", system: "Answer from the context." }));
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, {
      inputs: { q: "Context: The blue whale is the largest animal. Question: which animal is the largest?" },
    });
    expect(run.body).toMatchObject({ status: "success", outputs: { model: "loom/extractive" } });
    expect(typeof (run.body.outputs as { answer: unknown }).answer).toBe("string");
  });

  it("fails the run naming what to add when the organization has no chat connection", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, llmPipeline({}));
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "hi" } });
    expect(run.body).toMatchObject({
      status: "failed",
      state: "failed",
      error: expect.stringMatching(/^node ask failed: an llm node needs a chat model: add a connection of kind/),
    });
    const named = await createPipeline(key, llmPipeline({ model: "nowhere/some-model" }));
    expect((await send(key, "POST", `/v1/pipeline/${named}/run`, { inputs: { q: "hi" } })).body).toMatchObject({
      status: "failed",
      error: "node ask failed: model 'nowhere/some-model': this organization has no connection named 'nowhere'",
    });
  });
});

describe("pipelines: wired to the knowledge-base query", () => {
  it("queries a knowledge base with the query options and hands the results on", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKnowledgeBase(key);
    const id = await createPipeline(key, {
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        {
          id: "kb",
          type: "knowledge_base",
          config: { knowledge_base_id: kbId, query: "{{q}}", search_metadata: { top_k: 1 } },
        },
        { id: "hits", type: "output", config: { name: "hits", value: "{{kb.results}}" } },
        { id: "context", type: "output", config: { name: "context", value: "{{kb}}" } },
      ],
      edges: [
        { source: "q", target: "kb" },
        { source: "kb", target: "hits" },
        { source: "kb", target: "context" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "largest whale" } });
    expect(run.body.status).toBe("success");
    const outputs = run.body.outputs as {
      hits: { text: string; document_id: string; score: number }[];
      context: string;
    };
    expect(outputs.hits).toHaveLength(1);
    expect(outputs.hits[0].text).toContain("blue whale");
    expect(outputs.context).toMatch(/^\[1\] Whales are marine mammals/);
  });

  it("the built-in loom/extractive answers from knowledge-base context pasted into an llm node's prompt", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKnowledgeBase(key);
    const id = await createPipeline(key, {
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        {
          id: "kb",
          type: "knowledge_base",
          config: { knowledge_base_id: kbId, query: "{{q}}", search_metadata: { top_k: 2 } },
        },
        {
          id: "ask",
          type: "llm",
          config: {
            model: "loom/extractive",
            system: "Answer from the context only.",
            prompt: "Context:\n{{kb}}\n\nQuestion: {{q}}",
          },
        },
        { id: "out", type: "output", config: { name: "answer", value: "{{ask}}" } },
      ],
      edges: [
        { source: "q", target: "kb" },
        { source: "kb", target: "ask" },
        { source: "q", target: "ask" },
        { source: "ask", target: "out" },
      ],
    });
    const run = await send(key, "POST", `/v1/pipeline/${id}/run`, {
      inputs: { q: "which whale is the largest animal?" },
    });
    expect(run.body.status).toBe("success");
    const answer = (run.body.outputs as { answer: string }).answer;
    expect(answer).not.toContain("none were given");
    expect(answer).toContain("blue whale");
    // The same with the context inline on one line, as a person might write the prompt.
    const inline = await createPipeline(key, llmInline());
    const second = await send(key, "POST", `/v1/pipeline/${inline}/run`, {
      inputs: { q: "Context: The blue whale is the largest animal. Question: which animal is the largest?" },
    });
    expect((second.body.outputs as { answer: string }).answer).toContain("The blue whale is the largest animal");
  });

  it("checks the query options when the pipeline is created, and the knowledge base's visibility", async () => {
    const org = await seedOrg();
    const other = await seedOrg();
    const foreign = await createKnowledgeBase(other.owner.apiKey);
    const kbNode = (kbId: string, extra: Record<string, unknown> = {}) => ({
      name: uniqueName(),
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        { id: "kb", type: "knowledge_base", config: { knowledge_base_id: kbId, query: "{{q}}", ...extra } },
      ],
      edges: [{ source: "q", target: "kb" }],
    });
    expect(await send(org.owner.apiKey, "POST", "/v1/pipeline", kbNode(foreign))).toEqual({
      status: 400,
      body: { status: "failed", error: `node kb: knowledge base ${foreign} does not exist or you cannot use it` },
    });
    const own = await createKnowledgeBase(org.owner.apiKey);
    const bad = await send(org.owner.apiKey, "POST", "/v1/pipeline", kbNode(own, { search_metadata: { top_k: 0 } }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^node kb \(knowledge_base\): config\.search_metadata\.top_k: /);
  });

  it("fails the run with the knowledge base's own message for a bad retrieval unit", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKnowledgeBase(key);
    const id = await createPipeline(key, {
      nodes: [
        { id: "q", type: "input", config: { name: "q" } },
        {
          id: "kb",
          type: "knowledge_base",
          config: { knowledge_base_id: kbId, query: "{{q}}", config: { retrieval_unit: "paragraphs" } },
        },
      ],
      edges: [{ source: "q", target: "kb" }],
    });
    expect((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "bread" } })).body).toMatchObject({
      status: "failed",
      error: "node kb failed: invalid retrieval unit: paragraphs",
    });
  });
});

/** An llm node on loom/extractive whose whole prompt is the input. */
function llmInline(): Record<string, unknown> {
  return {
    nodes: [
      { id: "q", type: "input", config: { name: "q" } },
      { id: "ask", type: "llm", config: { model: "loom/extractive", prompt: "{{q}}" } },
      { id: "out", type: "output", config: { name: "answer", value: "{{ask}}" } },
    ],
    edges: [
      { source: "q", target: "ask" },
      { source: "ask", target: "out" },
    ],
  };
}
