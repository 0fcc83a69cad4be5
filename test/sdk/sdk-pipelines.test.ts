import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { waitForRun } from "../pipelines/fixtures";
import { sdkNewKnowledgeBase, sdkRequest, sdkUpload, type Body } from "./sdk-wire";

/**
 * Pipelines as the hosted platform's SDK builds them (`Pipeline._prepare_pipeline_data`): nodes
 * keyed by id, each `{id, name, type, inputs, outputs, task_name, execution_mode}`, wired by
 * `{{ node_id.output }}` references, with `canvas_metadata`, `inputs` and `outputs` beside them.
 */

const oid = (): string =>
  [...crypto.getRandomValues(new Uint8Array(12))].map((b) => b.toString(16).padStart(2, "0")).join("");

interface SdkNode {
  id: string;
  name: string;
  type: string;
  inputs: Body;
  outputs: string[];
  task_name: string | null;
  execution_mode: string;
}

const node = (type: string, name: string, inputs: Body, outputs: string[]): SdkNode => ({
  id: `${type}_${oid()}`,
  name,
  type,
  // Every SDK node carries `dependencies` (default []) among its inputs.
  inputs: { ...inputs, dependencies: [] },
  outputs: [...outputs, "complete"],
  task_name: null,
  execution_mode: "normal",
});

const inputNode = (name: string, inputType = "string") =>
  node(
    "input",
    name,
    { input_type: inputType, file_parser: "default" },
    inputType === "file" ? ["processed_text", "file"] : ["text"],
  );
const outputNode = (name: string, value: string) => node("output", name, { output_type: "string", value }, []);
const textNode = (name: string, text: string) => node("text", name, { text }, ["text"]);

/** The body `Pipeline.new` posts (and, with `branch_id`, what `save` posts). */
function sdkDocument(nodes: SdkNode[]): Body {
  const doc = {
    nodes: {} as Body,
    canvas_metadata: { nodes: {} as Body, edges: [] as Body[] },
    inputs: {} as Body,
    outputs: {} as Body,
  };
  nodes.forEach((n, i) => {
    doc.nodes[n.id] = n;
    doc.canvas_metadata.nodes[n.id] = { position: { x: i * 300, y: 0 }, width: 250, height: 155 };
    if (n.type === "input") doc.inputs[n.name] = { io_type: n.inputs.input_type, description: "" };
    if (n.type === "output") doc.outputs[n.name] = { io_type: n.inputs.output_type, description: "" };
  });
  return doc;
}

const sdkNew = (key: string, name: string, nodes: SdkNode[]) =>
  sdkRequest(key, "POST", "/pipeline", { json: { ...sdkDocument(nodes), name } });
const sdkSave = (key: string, id: string, branchId: unknown, nodes: SdkNode[]) =>
  sdkRequest(key, "POST", `/update/pipeline/${id}`, { json: { ...sdkDocument(nodes), branch_id: branchId } });

function greeter(prefix: string) {
  const question = inputNode("question");
  const greet = textNode("text_0", `${prefix} {{ ${question.id}.text }}`);
  const answer = outputNode("answer", `{{ ${greet.id}.text }}`);
  return { question, greet, answer, nodes: [question, greet, answer] };
}

describe("the hosted SDK's Pipeline against Loom", () => {
  it("new answers id and branch_id; fetch answers nodes as a dict and mainBranch; run computes through the references", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const g = greeter("Q:");
    // An LLM node as the SDK sends it, every default included; created and fetched, not run here.
    const llm = node(
      "llm",
      "llm_0",
      {
        provider: "openai",
        model: "gpt-4o",
        system: "",
        prompt: `Say {{ ${g.question.id}.text }}`,
        temperature: 0.5,
        max_tokens: 128000,
        top_p: 0.5,
        stream: false,
        json_schema: "",
        api_key: "",
        citation_metadata: [""],
        deployment_id: null,
      },
      ["response", "tokens_used"],
    );
    const said = outputNode("said", `{{ ${llm.id}.response }}`);
    const created = await sdkNew(key, "sdk-greeter", [...g.nodes, llm, said]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body).toMatchObject({ status: "success", id: expect.any(String), branch_id: expect.any(String) });
    const id = String(created.body.id);

    const fetched = await sdkRequest(key, "GET", "/pipeline", { query: { id } });
    expect(fetched.status).toBe(200);
    const object = fetched.body.object as Body;
    expect(object._id).toBe(id);
    expect(object.mainBranch).toBe(created.body.branch_id);
    const nodes = object.nodes as Record<string, Body>;
    expect(Object.keys(nodes).sort()).toEqual([g.question.id, g.greet.id, g.answer.id, llm.id, said.id].sort());
    // What `Node.from_json` reads: type, inputs, id, name, execution_mode.
    expect(nodes[g.greet.id]).toMatchObject({
      id: g.greet.id,
      name: "text_0",
      type: "text",
      inputs: g.greet.inputs,
      execution_mode: "normal",
    });
    expect(nodes[llm.id].inputs).toMatchObject({ model: "gpt-4o", provider: "openai", prompt: llm.inputs.prompt });
    // Loom's own graph rides along; the LLM's model is named `<connection>/<model>`.
    const graph = object.graph as { nodes: Body[]; edges: Body[] };
    expect(graph.nodes.find((n) => n.id === llm.id)?.config).toMatchObject({
      model: "openai/gpt-4o",
      temperature: 0.5,
    });
    expect(graph.edges).toContainEqual({ source: g.question.id, target: g.greet.id });

    const byName = await sdkRequest(key, "GET", "/pipeline", { query: { name: "sdk-greeter" } });
    expect((byName.body.object as Body)._id).toBe(id);

    const ranOnlyGreeter = await sdkNew(key, "sdk-greeter-only", g.nodes);
    const ran = await sdkRequest(key, "POST", `/pipeline/${String(ranOnlyGreeter.body.id)}/run`, {
      json: { inputs: { question: "hi" } },
    });
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(ran.body).toMatchObject({ run_id: expect.any(String), outputs: { answer: "Q: hi" } });
  });

  it("save makes a new version; a run in progress finishes on the version it started with", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const question = inputNode("question");
    // Loom's approval node has no SDK class; through the editor format its inputs are its config.
    const gate = node("approval", "gate", { message: "go on?" }, ["value"]);
    const greet = textNode("text_0", `v1 {{ ${question.id}.text }}`);
    greet.inputs.dependencies = [`{{ ${gate.id}.value }}`];
    gate.inputs.dependencies = [`{{ ${question.id}.text }}`];
    const answer = outputNode("answer", `{{ ${greet.id}.text }}`);
    const created = await sdkNew(key, "sdk-versions", [question, gate, greet, answer]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = String(created.body.id);

    const paused = await sdkRequest(key, "POST", `/pipeline/${id}/run`, { json: { inputs: { question: "x" } } });
    expect(paused.body).toMatchObject({ state: "paused" });
    const runId = String(paused.body.run_id);

    const v2 = textNode("text_0", `v2 {{ ${question.id}.text }}`);
    const v2Answer = outputNode("answer", `{{ ${v2.id}.text }}`);
    const saved = await sdkSave(key, id, created.body.branch_id, [question, v2, v2Answer]);
    expect(saved.status, JSON.stringify(saved.body)).toBe(200);
    expect(saved.body).toMatchObject({ status: "success", id, branch_id: created.body.branch_id, version: 2 });

    const fetched = await sdkRequest(key, "GET", "/pipeline", { query: { id } });
    expect(Object.keys((fetched.body.object as Body).nodes as Body).sort()).toEqual(
      [question.id, v2.id, v2Answer.id].sort(),
    );
    expect((fetched.body.object as Body).version).toBe(2);

    expect((await sdkRequest(key, "POST", `/pipeline/${id}/resume`, { json: { run_ids: [runId] } })).status).toBe(200);
    expect(await waitForRun(key, id, runId, (s) => s === "completed" || s === "failed")).toMatchObject({
      status: "completed",
      result: { answer: "v1 x" },
    });

    const fresh = await sdkRequest(key, "POST", `/pipeline/${id}/run`, { json: { inputs: { question: "y" } } });
    expect(fresh.body).toMatchObject({ outputs: { answer: "v2 y" } });
  });

  it("run takes a file input as a top-level multipart part named after the input", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const doc = inputNode("doc", "file");
    const label = inputNode("label");
    const out = outputNode("file_back", `{{ ${doc.id}.file }}`);
    const tag = outputNode("tag", `{{ ${label.id}.text }}`);
    const created = await sdkNew(key, "sdk-files", [doc, label, out, tag]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = String(created.body.id);

    const ran = await sdkUpload(
      key,
      `/pipeline/${id}/run`,
      [["inputs", JSON.stringify({ label: "mine" })]],
      [{ field: "doc", filename: "notes.txt", content: "hello file" }],
    );
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    const outputs = ran.body.outputs as Body;
    expect(outputs.tag).toBe("mine");
    expect(outputs.file_back).toMatchObject({
      type: "file",
      raw_bytes: btoa("hello file"),
      metadata: { name: "notes.txt" },
    });

    const twice = await sdkUpload(
      key,
      `/pipeline/${id}/run`,
      [["inputs", JSON.stringify({ label: "a", doc: "text" })]],
      [{ field: "doc", filename: "n.txt", content: "x" }],
    );
    expect(twice).toEqual({
      status: 400,
      body: { status: "failed", error: "doc: given both as a file part and in inputs" },
    });
    // A part is held to the bound of `inputs` (1 MiB as JSON), which its field's schema cannot see.
    const big = await sdkUpload(
      key,
      `/pipeline/${id}/run`,
      [["inputs", JSON.stringify({ label: "a" })]],
      [{ field: "doc", filename: "big.bin", content: new Uint8Array(800 * 1024) }],
    );
    expect(big).toEqual({
      status: 400,
      body: { status: "failed", error: "inputs: with the file parts, must serialize to at most 1048576 bytes" },
    });
    // Other unknown top-level fields stay ignored, as before.
    const extra = await sdkRequest(key, "POST", `/pipeline/${id}/run`, {
      json: { inputs: { label: "b", doc: "as text" }, unrelated: 1 },
    });
    expect(extra.body).toMatchObject({ outputs: { tag: "b", file_back: "as text" } });
  });

  it("refuses a node type Loom cannot run, naming it; old Loom-format bodies still create", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const g = greeter("Q:");
    const memory = node("chat_memory", "chat_memory_0", { memory_type: "Token Buffer", memory_window: 2048 }, [
      "memory",
    ]);
    const refused = await sdkNew(key, "sdk-unknown", [...g.nodes, memory]);
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual({
      status: "failed",
      error: `node ${memory.id}: node type "chat_memory" is not one Loom can run (Loom runs: input, output, text, llm, knowledge_base, transformation, pipeline, condition, merge, approval, wait)`,
    });

    // References are edges; more than Loom's 1000 edges is refused like a definition with that many.
    const sources = Array.from({ length: 40 }, (_, i) => textNode(`t${i}`, "x"));
    const sinks = Array.from({ length: 26 }, (_, i) =>
      textNode(`s${i}`, sources.map((t) => `{{ ${t.id}.text }}`).join(" ")),
    );
    const dense = await sdkNew(key, "sdk-dense", [...sources, ...sinks]);
    expect(dense).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: `node ${sinks[25].id}: the references make more than 1000 edges, the most a pipeline may have`,
      },
    });

    const audio = inputNode("voice", "audio");
    const noAudio = await sdkNew(key, "sdk-audio", [audio, outputNode("o", `{{ ${audio.id}.audio }}`)]);
    expect(noAudio.status).toBe(400);
    expect(String(noAudio.body.error)).toContain(`node ${audio.id} (input): input_type "audio" is not one Loom runs`);

    const loom = await sdkRequest(key, "POST", "/pipeline", {
      json: {
        name: "loom-form",
        nodes: [
          { id: "in", type: "input", config: { name: "q" } },
          { id: "out", type: "output", config: { name: "a", value: "{{in}}" } },
        ],
        edges: [{ source: "in", target: "out" }],
      },
    });
    expect(loom.status).toBe(200);
    const fetched = await sdkRequest(key, "GET", "/pipeline", { query: { id: String(loom.body.id) } });
    // Loom's format keeps its answer; fetch answers the editor's dict of nodes the SDK parses
    // (sdk-fetch-shapes.test.ts), with Loom's list of nodes under graph; the branch and version are added.
    expect(loom.body).toEqual({ status: "success", id: expect.any(String) });
    const object = fetched.body.object as Body;
    expect(object).toMatchObject({
      format: "loom",
      version: 1,
      graph: { nodes: [{ id: "in" }, { id: "out" }] },
      nodes: { in: { type: "input" }, out: { type: "output" } },
      mainBranch: expect.any(String),
    });
    expect(object.branch_id).toBe(object.mainBranch);
  });

  it("takes knowledge bases, transformations and sub-pipelines given as ids or as the SDK's {object_id, object_type}", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const kbId = await sdkNewKnowledgeBase(key);
    const inner = await sdkNew(key, "sdk-inner", greeter("inner:").nodes);
    const innerId = String(inner.body.id);
    const question = inputNode("question");
    const kb = node(
      "knowledge_base",
      "kb_0",
      {
        knowledge_base: { object_id: kbId, object_type: 1 },
        query: `{{ ${question.id}.text }}`,
        max_docs_per_query: 5,
      },
      ["formatted_text", "chunks"],
    );
    const sub = node(
      "pipeline",
      "pipeline_0",
      {
        pipeline_id: { object_id: innerId, object_type: 0, branch_id: inner.body.branch_id },
        question: `{{ ${kb.id}.formatted_text }}`,
      },
      ["answer"],
    );
    const answer = outputNode("answer", `{{ ${sub.id}.answer }}`);
    const created = await sdkNew(key, "sdk-refs", [question, kb, sub, answer]);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const fetched = await sdkRequest(key, "GET", "/pipeline", { query: { id: String(created.body.id) } });
    const graph = (fetched.body.object as Body).graph as { nodes: Body[] };
    expect(graph.nodes.find((n) => n.id === kb.id)?.config).toEqual({
      knowledge_base_id: kbId,
      query: `{{${question.id}.value}}`,
    });
    expect(graph.nodes.find((n) => n.id === sub.id)?.config).toEqual({
      pipeline_id: innerId,
      inputs: { question: `{{${kb.id}.text}}` },
    });

    const stranger = (await seedOrg()).owner.apiKey;
    const foreign = await sdkNew(stranger, "sdk-foreign", [
      question,
      { ...sub, inputs: { pipeline_id: innerId, question: `{{ ${question.id}.text }}`, dependencies: [] } },
      answer,
    ]);
    expect(foreign).toEqual({
      status: 400,
      body: { status: "failed", error: `node ${sub.id}: pipeline ${innerId} does not exist or you cannot use it` },
    });
  });

  it("save is the owner's or an admin's; another organization's pipeline is a 404", async () => {
    const org = await seedOrg();
    const g = greeter("Q:");
    const created = await sdkNew(org.owner.apiKey, "sdk-owned", g.nodes);
    const id = String(created.body.id);
    const member = await org.addMember("member");
    const byMember = await sdkSave(member.apiKey, id, created.body.branch_id, greeter("M:").nodes);
    expect(byMember).toEqual({
      status: 403,
      body: { status: "failed", error: "only the pipeline's owner or an admin can change it" },
    });
    const admin = await org.addMember("admin");
    expect((await sdkSave(admin.apiKey, id, created.body.branch_id, greeter("A:").nodes)).body).toMatchObject({
      version: 2,
    });

    const stranger = (await seedOrg()).owner.apiKey;
    expect(await sdkSave(stranger, id, created.body.branch_id, greeter("S:").nodes)).toEqual({
      status: 404,
      body: { status: "failed", error: "pipeline not found" },
    });
    const ran = await sdkRequest(org.owner.apiKey, "POST", `/pipeline/${id}/run`, {
      json: { inputs: { question: "z" } },
    });
    expect(ran.body).toMatchObject({ outputs: { answer: "A: z" } });
  });
});
