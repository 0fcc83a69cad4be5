import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createPipeline, SMALLEST, waitForRun, WITH_APPROVAL } from "../pipelines/fixtures";
import { createKb } from "../knowledge-bases/kb-fixtures";
import { sdkRequest, type Body } from "./sdk-wire";

/**
 * `Chatbot.fetch` and `Pipeline.fetch` read what every record must carry, whatever wrote it: a
 * chatbot answering through knowledge bases, a pipeline last written in Loom's own format.
 */

/** The node types the SDK's `Node.from_json` knows among Loom's (its registry has no approval or wait). */
const SDK_NODE_TYPES = new Set([
  "input",
  "output",
  "text",
  "llm",
  "knowledge_base",
  "transformation",
  "pipeline",
  "condition",
  "merge",
]);

/** `Pipeline.from_json` (0.0.76-0.0.82): each value of `nodes` through `Node.from_json`, then the input and output types. */
function sdkPipelineFromJson(
  object: Body,
  registry = SDK_NODE_TYPES,
): { id: unknown; branchId: unknown; inputs: Body; outputs: Body; nodes: Body[] } {
  const nodes = object.nodes;
  if (typeof nodes !== "object" || nodes === null || Array.isArray(nodes))
    throw new Error("AttributeError: 'list' object has no attribute 'values'");
  const parsed = Object.values(nodes as Record<string, Body>).map((node) => {
    if (typeof node.type !== "string" || !node.type) throw new Error("ValueError: JSON data must include 'type' field");
    if (!registry.has(node.type)) throw new Error(`ValueError: Unknown node type: ${node.type}`);
    if (typeof node.inputs !== "object" || node.inputs === null)
      throw new Error(`node ${String(node.id)}: inputs is not a dict`);
    for (const key of ["id", "name", "execution_mode"]) if (!(key in node)) throw new Error(`KeyError: '${key}'`);
    return node;
  });
  const inputs: Body = {};
  const outputs: Body = {};
  for (const node of parsed) {
    const given = node.inputs as Body;
    if (node.type === "input") inputs[String(node.name)] = given.input_type ?? "string";
    if (node.type === "output") outputs[String(node.name)] = given.output_type ?? "string";
  }
  return { id: object._id, branchId: object.mainBranch, inputs, outputs, nodes: parsed };
}

/** `Pipeline.save` of what fetch gave: the same nodes, canvas, inputs and outputs, with the branch. */
const sdkSaveFetched = (key: string, object: Body) =>
  sdkRequest(key, "POST", `/update/pipeline/${String(object._id)}`, {
    json: {
      nodes: object.nodes,
      canvas_metadata: object.canvas_metadata,
      inputs: object.inputs,
      outputs: object.outputs,
      branch_id: object.mainBranch,
    },
  });

describe("Chatbot.fetch on every chatbot", () => {
  it("a knowledge-base chatbot answers a pipeline object with null ids, which the SDK reads", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await createKb(key);
    const created = await sdkRequest(key, "POST", "/chatbot", {
      json: { name: `kb-bot-${crypto.randomUUID()}`, knowledge_base_ids: [kb], system_prompt: "Answer." },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const fetched = await sdkRequest(key, "GET", "/chatbot", { query: { id: String(created.body.id) } });
    const object = fetched.body.object as Body;
    // The SDK reads `object["pipeline"]["object_id"]`: on `null` that is a TypeError.
    expect(object.pipeline).toEqual({ id: null, object_id: null, input: null, output: null });
    expect(object).toMatchObject({ knowledgeBaseIds: [kb], input: null, output: null, deployed: false });
    const listed = await sdkRequest(key, "GET", "/chatbots", { query: { verbose: "true" } });
    expect((listed.body.objects as Body[]).map((o) => (o.pipeline as Body).object_id)).toEqual([null]);
  });
});

describe("Pipeline.fetch on a pipeline written in Loom's format", () => {
  it("answers nodes as the editor's dict the SDK parses, Loom's graph under graph; saving it back runs the same", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const id = await createPipeline(key, SMALLEST);
    const fetched = await sdkRequest(key, "GET", "/pipeline", { query: { id } });
    expect(fetched.status).toBe(200);
    const object = fetched.body.object as Body;
    const sdk = sdkPipelineFromJson(object);
    expect(sdk).toMatchObject({
      id,
      branchId: expect.any(String),
      inputs: { q: "string" },
      outputs: { answer: "string" },
    });
    expect(object).toMatchObject({ format: "loom", graph: SMALLEST, edges: SMALLEST.edges });
    const nodes = object.nodes as Record<string, Body>;
    expect(nodes.greet).toEqual({
      id: "greet",
      name: "greet",
      type: "text",
      inputs: { text: "Hello {{ in.text }}", dependencies: [] },
      outputs: ["text"],
      task_name: null,
      execution_mode: "normal",
    });
    expect(nodes.out.inputs).toEqual({ output_type: "string", value: "{{ greet.text }}", dependencies: [] });

    // What the SDK would post back from that object is a valid editor document with the same behaviour.
    const saved = await sdkSaveFetched(key, object);
    expect(saved.status, JSON.stringify(saved.body)).toBe(200);
    const ran = await sdkRequest(key, "POST", `/pipeline/${id}/run`, { json: { inputs: { q: "world" } } });
    expect(ran.body).toMatchObject({ outputs: { answer: "Hello world" } });
  });

  it("ordering-only edges become the SDK's dependencies; an approval node keeps pausing after a round trip", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const id = await createPipeline(key, WITH_APPROVAL);
    const object = (await sdkRequest(key, "GET", "/pipeline", { query: { id } })).body.object as Body;
    const nodes = object.nodes as Record<string, Body>;
    expect((nodes.gate.inputs as Body).dependencies).toEqual(["{{ in.text }}"]);
    expect((nodes.greet.inputs as Body).dependencies).toEqual(["{{ gate.value }}"]);
    // Loom's approval node has no SDK class: the dict parses everywhere but Node.from_json names it.
    expect(() => sdkPipelineFromJson(object)).toThrow("Unknown node type: approval");
    expect((await sdkSaveFetched(key, object)).status).toBe(200);
    const paused = await sdkRequest(key, "POST", `/pipeline/${id}/run`, { json: { inputs: { q: "x" } } });
    expect(paused.body).toMatchObject({ state: "paused" });
    expect(
      (await sdkRequest(key, "POST", `/pipeline/${id}/resume`, { json: { run_ids: [paused.body.run_id] } })).status,
    ).toBe(200);
    expect(
      await waitForRun(key, id, String(paused.body.run_id), (s) => s === "completed" || s === "failed"),
    ).toMatchObject({ status: "completed", result: { answer: "Hello x" } });
  });

  it("LLM, knowledge-base and number inputs translate to the SDK's names and back", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kb = await createKb(key);
    const definition = {
      nodes: [
        { id: "in", type: "input", config: { name: "q", type: "number", description: "how many", default: 3 } },
        { id: "kb", type: "knowledge_base", config: { knowledge_base_id: kb, query: "{{in}}" } },
        {
          id: "ask",
          type: "llm",
          config: { prompt: "{{kb.results}} {{kb}}", model: "loom/extractive", temperature: 0.2 },
        },
        { id: "out", type: "output", config: { name: "a", value: "{{ask}}" } },
      ],
      edges: [
        { source: "in", target: "kb" },
        { source: "kb", target: "ask" },
        { source: "ask", target: "out" },
      ],
    };
    const id = await createPipeline(key, definition);
    const object = (await sdkRequest(key, "GET", "/pipeline", { query: { id } })).body.object as Body;
    const nodes = object.nodes as Record<string, Body>;
    expect(nodes.in.inputs).toEqual({
      input_type: "float",
      description: "how many",
      default_value: 3,
      dependencies: [],
    });
    expect(nodes.kb.inputs).toEqual({ knowledge_base: { object_id: kb }, query: "{{ in.text }}", dependencies: [] });
    expect(nodes.ask.inputs).toEqual({
      provider: "loom",
      model: "extractive",
      prompt: "{{ kb.chunks }} {{ kb.formatted_text }}",
      temperature: 0.2,
      dependencies: [],
    });
    expect(sdkPipelineFromJson(object).inputs).toEqual({ q: "float" });
    expect((await sdkSaveFetched(key, object)).status).toBe(200);
    const graph = ((await sdkRequest(key, "GET", "/pipeline", { query: { id } })).body.object as Body).graph as {
      nodes: Body[];
    };
    expect(graph.nodes).toEqual([
      {
        id: "in",
        type: "input",
        config: { name: "q", type: "number", description: "how many", default: 3, required: false },
      },
      { id: "kb", type: "knowledge_base", config: { knowledge_base_id: kb, query: "{{in.value}}" } },
      {
        id: "ask",
        type: "llm",
        config: { prompt: "{{kb.results}} {{kb.text}}", model: "loom/extractive", temperature: 0.2 },
      },
      { id: "out", type: "output", config: { name: "a", value: "{{ ask.response }}" } },
    ]);
  });
});

describe("task_name and execution_mode of editor nodes", () => {
  const editorNode = (id: string, type: string, inputs: Body, extra: Body) => ({
    id,
    name: id,
    type,
    inputs: { ...inputs, dependencies: [] },
    outputs: [],
    ...extra,
  });
  const doc = (extra: Body) => ({
    nodes: {
      input_0: editorNode("input_0", "input", { input_type: "string" }, { task_name: null, execution_mode: "normal" }),
      output_0: editorNode("output_0", "output", { output_type: "string", value: "{{ input_0.text }}" }, extra),
    },
    canvas_metadata: { nodes: {}, edges: [] },
    inputs: { input_0: { io_type: "string" } },
    outputs: { output_0: { io_type: "string" } },
  });

  it("are stored and answered back as saved; unset they answer the SDK's null and normal", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const created = await sdkRequest(key, "POST", "/pipeline", {
      json: { name: `tasks-${crypto.randomUUID()}`, ...doc({ task_name: "output_string", execution_mode: "normal" }) },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = String(created.body.id);
    const nodes = () =>
      sdkRequest(key, "GET", "/pipeline", { query: { id } }).then(
        (r) => (r.body.object as Body).nodes as Record<string, Body>,
      );
    expect((await nodes()).output_0).toMatchObject({ task_name: "output_string", execution_mode: "normal" });
    expect((await nodes()).input_0).toMatchObject({ task_name: null, execution_mode: "normal" });
    const saved = await sdkRequest(key, "POST", `/update/pipeline/${id}`, {
      json: { ...doc({}), branch_id: created.body.branch_id },
    });
    expect(saved.status).toBe(200);
    expect((await nodes()).output_0).toMatchObject({ task_name: null, execution_mode: "normal" });
  });

  it("an execution mode Loom does not run is a 400 naming the node, not silently run as normal", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const refused = await sdkRequest(key, "POST", "/pipeline", {
      json: { name: `batch-${crypto.randomUUID()}`, ...doc({ task_name: null, execution_mode: "batch" }) },
    });
    expect(refused).toEqual({
      status: 400,
      body: {
        status: "failed",
        error:
          'node output_0: execution_mode "batch" is not one Loom runs (Loom runs each node once per run: "normal")',
      },
    });
  });
});
