import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createPipeline } from "../pipelines/fixtures";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { sdkRequest, sdkUpload, type Body } from "./sdk-wire";

/** The offline model quotes numbered sources it finds in the system prompt. */
const SOURCES = "<sources>\n[1] The blue whale is the largest animal.\n[2] Sourdough bread rises slowly.\n</sources>";

/** A pipeline as the hosted platform names its nodes: input `input_0`, an LLM on the offline model, output `output_0`. */
const HOSTED_NAMES = {
  nodes: [
    { id: "input_0", type: "input", config: { name: "input_0" } },
    { id: "llm_0", type: "llm", config: { prompt: "{{input_0}}", model: "loom/extractive", system: `${SOURCES}` } },
    { id: "output_0", type: "output", config: { name: "output_0", value: "{{llm_0}}" } },
  ],
  edges: [
    { source: "input_0", target: "llm_0" },
    { source: "llm_0", target: "output_0" },
  ],
};

const QUESTION = "Which animal is the largest?";

/** `Chatbot.new(name, description, pipeline_id, ...)`: every option object `or {}`, node names `or ""`, `deployed: False`. */
function sdkNew(key: string, pipelineId: string, options: Body = {}) {
  return sdkRequest(key, "POST", "/chatbot", {
    json: {
      name: `bot-${crypto.randomUUID()}`,
      description: "sdk bot",
      pipeline: { id: pipelineId },
      deployment_options: {},
      access_config: {},
      twilio_config: {},
      slack_config: {},
      input: "",
      output: "",
      deployed: false,
      ...options,
    },
  });
}

/** What `Chatbot.fetch` reads from `object`; a missing key is the SDK's KeyError. */
function sdkFetchFields(object: Body): Body {
  const keys = [
    "_id",
    "name",
    "description",
    "deployment_options",
    "access_config",
    "twilio_config",
    "slack_config",
    "deployed",
    "input",
    "output",
  ];
  for (const k of keys) if (!(k in object)) throw new Error(`KeyError: '${k}'`);
  return { ...Object.fromEntries(keys.map((k) => [k, object[k]])), pipeline_id: (object.pipeline as Body).object_id };
}

describe("the hosted SDK's Chatbot against Loom", () => {
  it("new with the SDK's defaults over a pipeline whose input node is input_0 answers messages (offline model), and fetch reads every field", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const pipelineId = await createPipeline(key, HOSTED_NAMES);
    const name = `bot-${crypto.randomUUID()}`;
    const created = await sdkNew(key, pipelineId, { name });
    expect(created.status).toBe(200);
    const id = String(created.body.id);

    const ran = await sdkRequest(key, "POST", `/chatbot/${id}/run`, { json: { text: QUESTION } });
    expect(ran.status).toBe(200);
    expect(ran.body).toMatchObject({ status: "success", answered_by: `pipeline/${pipelineId}` });
    expect(String(ran.body.output_message)).toContain("blue whale");
    expect(typeof ran.body.conversation_id).toBe("string");

    for (const query of [{ id }, { name }] as Record<string, string>[]) {
      const fetched = await sdkRequest(key, "GET", "/chatbot", { query });
      expect(fetched.status).toBe(200);
      const object = fetched.body.object as Body;
      expect(sdkFetchFields(object)).toMatchObject({
        _id: id,
        description: "sdk bot",
        pipeline_id: pipelineId,
        deployed: false,
        input: "input_0",
        output: null,
        deployment_options: { browser_extension: false },
        access_config: { mode: "public", has_password: false },
        twilio_config: { enabled: false, has_auth_token: false },
        slack_config: { enabled: false, has_bot_token: false },
      });
      // Loom's own fields stay for old clients.
      expect(object).toMatchObject({
        pipeline: { id: pipelineId, input: "input_0" },
        deployment: {},
        access: { mode: "public" },
        telephony: { enabled: false },
        chatworkspace: { enabled: false },
      });
    }
  });

  it("new with input_node_name / output_node_name stores them; a node may be named by its id", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const byName = await sdkNew(key, await createPipeline(key, HOSTED_NAMES), { input: "input_0", output: "output_0" });
    expect(byName.status).toBe(200);
    const fetched = (await sdkRequest(key, "GET", "/chatbot", { query: { id: String(byName.body.id) } })).body
      .object as Body;
    expect(fetched).toMatchObject({ input: "input_0", output: "output_0" });

    // Input node id `input_0`, input name `q`: the node id resolves to the name the pipeline runs with.
    const renamed = {
      ...HOSTED_NAMES,
      nodes: [
        { id: "input_0", type: "input", config: { name: "q" } },
        { ...HOSTED_NAMES.nodes[1], config: { ...HOSTED_NAMES.nodes[1].config, prompt: "{{input_0}}" } },
        HOSTED_NAMES.nodes[2],
      ],
    };
    const byId = await sdkNew(key, await createPipeline(key, renamed), { input: "input_0", output: "output_0" });
    expect(byId.status).toBe(200);
    expect(
      ((await sdkRequest(key, "GET", "/chatbot", { query: { id: String(byId.body.id) } })).body.object as Body).input,
    ).toBe("q");
    const ran = await sdkRequest(key, "POST", `/chatbot/${String(byId.body.id)}/run`, { json: { text: QUESTION } });
    expect(String(ran.body.output_message)).toContain("blue whale");
  });

  it("new maps deployment_options, access_config, twilio_config and slack_config onto Loom's settings; fetch never echoes a secret", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const pipelineId = await createPipeline(key, HOSTED_NAMES);
    const created = await sdkNew(key, pipelineId, {
      deployment_options: { greeting: "Hi!", primary_color: "#112233", display_name: null },
      access_config: { mode: "password", password: "visitor-pass-123", rate_limit_per_minute: 7 },
      twilio_config: {
        account_sid: "AC123",
        auth_token: "twilio-secret-9876",
        phone_number: "+15551234567",
        enabled: true,
      },
      slack_config: {
        team_id: "T1",
        signing_secret: "slack-signing-secret",
        bot_token: "xoxb-slack-token-5555",
        enabled: true,
      },
      deployed: true,
    });
    expect(created.status).toBe(200);
    const fetched = await sdkRequest(key, "GET", "/chatbot", { query: { id: String(created.body.id) } });
    const object = fetched.body.object as Body;
    expect(sdkFetchFields(object)).toMatchObject({
      deployed: true,
      deployment_options: { greeting: "Hi!", primary_color: "#112233" },
      access_config: { mode: "password", has_password: true, rate_limit_per_minute: 7 },
      twilio_config: {
        account_sid: "AC123",
        phone_number: "+15551234567",
        enabled: true,
        has_auth_token: true,
        auth_token_last_four: "9876",
      },
      slack_config: {
        team_id: "T1",
        enabled: true,
        has_signing_secret: true,
        has_bot_token: true,
        bot_token_last_four: "5555",
      },
    });
    const text = JSON.stringify(fetched.body);
    for (const secret of ["visitor-pass-123", "twilio-secret-9876", "slack-signing-secret", "xoxb-slack-token-5555"])
      expect(text).not.toContain(secret);

    // A fetched record's options can be sent back to new (the read-only keys are ignored).
    const again = await sdkNew(key, pipelineId, {
      deployment_options: object.deployment_options,
      access_config: { ...(object.access_config as Body), mode: "public" },
    });
    expect(again.status).toBe(200);
  });

  it("new refuses what it cannot honour, naming it", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const pipelineId = await createPipeline(key, HOSTED_NAMES);
    expect(await sdkNew(key, pipelineId, { input: "question" })).toEqual({
      status: 400,
      body: { status: "failed", error: "input: the pipeline has no input named 'question' (its inputs: input_0)" },
    });
    expect(await sdkNew(key, pipelineId, { output: "answer" })).toEqual({
      status: 400,
      body: { status: "failed", error: "output: the pipeline has no output named 'answer' (its outputs: output_0)" },
    });
    expect(await sdkNew(key, pipelineId, { input: "input_0", pipeline: { id: pipelineId, input: "other" } })).toEqual({
      status: 400,
      body: { status: "failed", error: "input: differs from pipeline.input; give one" },
    });
    const unknown = await sdkNew(key, pipelineId, { deployment_options: { aIDisclaimerText: "AI" } });
    expect(unknown.status).toBe(400);
    expect(String(unknown.body.error)).toContain("aIDisclaimerText");
    const badColour = await sdkNew(key, pipelineId, { deployment_options: { primary_color: "red" } });
    expect(badColour.status).toBe(400);
    expect(String(badColour.body.error)).toContain("primary_color");
    expect((await sdkNew(key, pipelineId, { access_config: { mode: "password" } })).body).toEqual({
      status: "failed",
      error: "password: is required when mode is password",
    });
  });

  it("run's filter: the SDK's InterfaceFilter selects or deselects knowledge bases and documents; a metadata filter narrows by metadata", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const whales = await createKb(key);
    const bread = await createKb(key);
    const blue = await indexText(key, whales, "blue.txt", "The blue whale is the largest animal and eats krill.", {
      topic: "blue",
    });
    await indexText(key, whales, "humpback.txt", "The humpback whale sings long songs and eats krill.", {
      topic: "humpback",
    });
    await indexText(key, bread, "bread.txt", "Sourdough bread rises slowly; some bakers feed krill to nobody.", {
      topic: "bread",
    });
    const created = await sdkRequest(key, "POST", "/chatbot", {
      json: { name: `kb-bot-${crypto.randomUUID()}`, knowledge_base_ids: [whales, bread], system_prompt: "Answer." },
    });
    const id = String(created.body.id);
    const sourcesOf = async (filter: unknown) => {
      const res = await sdkRequest(key, "POST", `/chatbot/${id}/run`, { json: { text: "what eats krill", filter } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body.sources as Body[]).map((s) => `${String(s.knowledgeBaseId)}/${String(s.name)}`).sort();
    };
    expect(await sourcesOf(undefined)).toEqual(
      [`${bread}/bread.txt`, `${whales}/blue.txt`, `${whales}/humpback.txt`].sort(),
    );
    // InterfaceFilter.model_dump() as JSON: enums by value, unset fields null.
    const item = (objectType: number, objectId: string, documentId: string | null = null) => ({
      object_id: objectId,
      item_id: null,
      document_id: documentId,
      is_integration_item_directory: null,
      object_type: objectType,
    });
    expect(await sourcesOf({ filter_items: [item(0, bread)], selection_mode: 1 })).toEqual([`${bread}/bread.txt`]);
    expect(await sourcesOf({ filter_items: [item(0, bread)], selection_mode: 0 })).toEqual([
      `${whales}/blue.txt`,
      `${whales}/humpback.txt`,
    ]);
    expect(await sourcesOf({ filter_items: [item(1, whales, blue)], selection_mode: "select" })).toEqual([
      `${whales}/blue.txt`,
    ]);
    expect(await sourcesOf({ filter_items: [item(1, whales, blue), item(0, bread)], selection_mode: 0 })).toEqual([
      `${whales}/humpback.txt`,
    ]);
    // A metadata filter in the knowledge-base query's language, as an object or as JSON text.
    expect(await sourcesOf({ must: [{ key: "topic", match: { value: "humpback" } }] })).toEqual([
      `${whales}/humpback.txt`,
    ]);
    expect(
      await sourcesOf(JSON.stringify({ must_not: [{ key: "topic", match: { any: ["humpback", "blue"] } }] })),
    ).toEqual([`${bread}/bread.txt`]);
  });

  it("upload_files: parts named files with message_index answer {knowledge_base_id, uploaded_files, document_id}; later answers use the files; the file form still works", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const created = await sdkRequest(key, "POST", "/chatbot", {
      json: { name: `kb-bot-${crypto.randomUUID()}`, system_prompt: "Answer from the documents." },
    });
    const id = String(created.body.id);
    const uploaded = await sdkUpload(
      key,
      `/chatbot/${id}/upload`,
      [["message_index", "0"]],
      [
        {
          field: "files",
          filename: "refunds.md",
          content: "Refunds take five business days.",
          contentType: "text/markdown",
        },
        {
          field: "files",
          filename: "/home/me/shipping.txt",
          content: "Shipping is free over fifty euros.",
          contentType: "application/octet-stream",
        },
      ],
    );
    expect(uploaded.status).toBe(200);
    const conversationId = String(uploaded.body.conversation_id);
    expect(uploaded.body).toMatchObject({ status: "success", knowledge_base_id: conversationId });
    const documentIds = uploaded.body.document_id as string[];
    expect(documentIds).toHaveLength(2);
    expect(uploaded.body.uploaded_files).toEqual([
      { name: "refunds.md", mime_type: "text/markdown", size: 32, document_id: documentIds[0] },
      { name: "/home/me/shipping.txt", mime_type: "text/plain", size: 34, document_id: documentIds[1] },
    ]);

    // One file, into the same conversation (requests sends conversation_id as a plain field).
    const more = await sdkUpload(
      key,
      `/chatbot/${id}/upload`,
      [
        ["conversation_id", conversationId],
        ["message_index", "2"],
      ],
      [{ field: "files", filename: "hours.txt", content: "We open at nine.", contentType: "text/plain" }],
    );
    expect(more.body).toMatchObject({
      status: "success",
      conversation_id: conversationId,
      knowledge_base_id: conversationId,
      uploaded_files: [{ name: "hours.txt" }],
    });

    const ran = await sdkRequest(key, "POST", `/chatbot/${id}/run`, {
      json: { text: "How long do refunds take?", conversation_id: conversationId },
    });
    expect(String(ran.body.output_message)).toContain("five business days");

    const old = await sdkUpload(
      key,
      `/chatbot/${id}/upload`,
      [],
      [{ field: "file", filename: "old.txt", content: "old form" }],
    );
    expect(old.status).toBe(200);
    expect(Object.keys(old.body).sort()).toEqual(["attachment", "conversation_id", "status"]);
    expect(old.body.attachment).toMatchObject({ name: "old.txt", mimeType: "text/plain", size: 8 });
  });
});
