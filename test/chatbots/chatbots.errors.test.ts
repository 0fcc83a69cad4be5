import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { createKb } from "../knowledge-bases/kb-fixtures";
import { WITH_APPROVAL, createPipeline } from "../pipelines/fixtures";
import { body, chatbotApp, createChatbot, deployPublic, run, sseEvents } from "./harness";

describe("chatbots: creation and lookup errors", () => {
  it("answers each invalid creation with a clear 400 (Group A) or 422 (Group B), and a taken name with 409", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const key = bearer(org.owner.apiKey);
    const create = async (fields: Record<string, unknown>) => {
      const res = await app.request("/v1/chatbot", json(fields, key));
      return { status: res.status, body: await body(res) };
    };
    expect(await create({ description: "x", system_prompt: "p" })).toMatchObject({
      status: 400,
      body: { status: "failed", error: expect.stringContaining("name") },
    });
    expect(await create({ name: "a", description: "x" })).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "give either pipeline.id, or knowledge_base_ids, a system_prompt and optionally a model",
      },
    });
    expect(await create({ name: "a", pipeline: { id: "a".repeat(24) }, system_prompt: "p" })).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "a chatbot answers through either a pipeline or knowledge bases and a model, not both",
      },
    });
    expect(await create({ name: "a", pipeline: { id: "0123456789abcdef01234567" } })).toEqual({
      status: 400,
      body: { status: "failed", error: "pipeline: no pipeline 0123456789abcdef01234567 in this organization" },
    });
    expect(await create({ name: "a", system_prompt: "p", model: "missing/gpt" })).toEqual({
      status: 400,
      body: { status: "failed", error: "model: no connection named 'missing' in this organization" },
    });
    expect(await create({ name: "a", system_prompt: "p", model: "no-slash" })).toEqual({
      status: 400,
      body: { status: "failed", error: "model: must be <connection>/<model>" },
    });
    expect(await create({ name: "a", system_prompt: "p", follow_up_questions: 9 })).toMatchObject({
      status: 400,
      body: { error: expect.stringContaining("follow_up_questions") },
    });
    expect(await create({ name: "a", knowledge_base_ids: ["nothex"] })).toMatchObject({
      status: 400,
      body: { error: expect.stringContaining("knowledge_base_ids") },
    });
    expect(await create({ name: "a", knowledge_base_ids: ["0123456789abcdef01234567"] })).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "knowledge_base_ids: no knowledge base 0123456789abcdef01234567 in this organization",
      },
    });
    const foreignKb = await createKb((await seedOrg()).owner.apiKey);
    expect(await create({ name: "a", knowledge_base_ids: [foreignKb] })).toEqual({
      status: 400,
      body: { status: "failed", error: `knowledge_base_ids: no knowledge base ${foreignKb} in this organization` },
    });
    expect((await create({ name: "dup", system_prompt: "p" })).status).toBe(200);
    expect(await create({ name: "dup", system_prompt: "p" })).toEqual({
      status: 409,
      body: { status: "failed", error: "you already have a chatbot named 'dup'" },
    });

    const groupB = await app.request("/chatbots/create", form({ description: "no name" }, bearer(org.owner.token)));
    expect(groupB.status).toBe(422);
    expect(await body(groupB)).toMatchObject({ detail: [{ loc: ["body", "name"] }] });
  });

  it("fetch needs an id or a name; unknown ids are 404; viewers cannot create", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const key = bearer(org.owner.apiKey);
    expect(await body(await app.request("/v1/chatbot", { headers: key }))).toEqual({
      status: "failed",
      error: "Either id or name must be provided",
    });
    const unknown = await app.request("/v1/chatbot?id=0123456789abcdef01234567", { headers: key });
    expect(unknown.status).toBe(404);
    expect(await body(await app.request("/v1/chatbot?id=bad", { headers: key }))).toEqual({
      status: "failed",
      error: "id: must be a 24-character hex id",
    });
    expect((await app.request("/chatbots/0123456789abcdef01234567", { headers: bearer(org.owner.token) })).status).toBe(
      404,
    );
    const viewer = await org.addMember("viewer");
    const refused = await app.request("/v1/chatbot", json({ name: "v", system_prompt: "p" }, bearer(viewer.apiKey)));
    expect(refused.status).toBe(403);
    expect(await body(refused)).toEqual({ status: "failed", error: "viewers cannot create or change records" });
  });
});

describe("chatbots: run errors", () => {
  it("needs text or audio, not both, not blank; an unknown conversation is 404", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    expect(await run(app, org.owner.apiKey, id, {})).toEqual({
      status: 400,
      body: { status: "failed", error: "text or audio is required" },
    });
    expect(await run(app, org.owner.apiKey, id, { text: "a", audio: btoa("b") })).toEqual({
      status: 400,
      body: { status: "failed", error: "give text or audio, not both" },
    });
    expect(await run(app, org.owner.apiKey, id, { text: "   " })).toEqual({
      status: 400,
      body: { status: "failed", error: "text: must not be blank" },
    });
    expect(await run(app, org.owner.apiKey, id, { audio: "%%%not base64" })).toEqual({
      status: 400,
      body: { status: "failed", error: "audio: must be base64 text or a file part" },
    });
    expect(await run(app, org.owner.apiKey, id, { text: "hi", conversation_id: "0123456789abcdef01234567" })).toEqual({
      status: 404,
      body: { status: "failed", error: "conversation not found" },
    });
    expect(await run(app, org.owner.apiKey, id, { text: "hi", stream: "maybe" })).toMatchObject({
      status: 400,
      body: { error: expect.stringContaining("stream") },
    });
    // Nothing was stored by the refused requests.
    expect(await body(await app.request(`/chatbots/conversations`, { headers: bearer(org.owner.token) }))).toEqual({
      status: "success",
      conversations: [],
    });
  });

  it("without a speech-to-text connection, audio is a 400 saying so", async () => {
    const org = await seedOrg();
    const created = await body(
      await call("/v1/chatbot", json({ name: "prod", system_prompt: "p" }, bearer(org.owner.apiKey))),
    );
    const audio = await call(
      `/v1/chatbot/${String(created.id)}/run`,
      json({ audio: btoa("hello") }, bearer(org.owner.apiKey)),
    );
    expect(audio.status).toBe(400);
    expect(await body(audio)).toEqual({
      status: "failed",
      error:
        "this chatbot needs a speech-to-text connection: add a connection with a transcription model, or send text",
    });
  });

  it("a pipeline run that does not complete is a clear failure, stored with the message", async () => {
    const org = await seedOrg();
    const pipelineId = await createPipeline(org.owner.apiKey, WITH_APPROVAL);
    const created = await body(
      await call(
        "/v1/chatbot",
        json({ name: "gated", pipeline: { id: pipelineId, input: "q", output: "answer" } }, bearer(org.owner.apiKey)),
      ),
    );
    const ran = await call(`/v1/chatbot/${String(created.id)}/run`, json({ text: "hello" }, bearer(org.owner.apiKey)));
    expect(ran.status).toBe(409);
    expect(String((await body(ran)).error)).toMatch(/^pipeline run [0-9a-f]{24} paused \(it has an approval node\)$/);
  });

  it("a model that names another organization's or a missing connection fails clearly", async () => {
    const org = await seedOrg();
    await call(
      "/admin/connections/create",
      form({ name: "gone", kind: "openai", secret: "sk-test-gone" }, bearer(org.owner.token)),
    );
    const created = await body(
      await call("/v1/chatbot", json({ name: "m", system_prompt: "p", model: "gone/gpt-x" }, bearer(org.owner.apiKey))),
    );
    await call("/admin/connections/delete", form({ name: "gone" }, bearer(org.owner.token), "DELETE"));
    const ran = await call(`/v1/chatbot/${String(created.id)}/run`, json({ text: "hello" }, bearer(org.owner.apiKey)));
    expect(ran.status).toBe(400);
    expect(await body(ran)).toEqual({
      status: "failed",
      error: "model 'gone/gpt-x': this organization has no connection named 'gone'",
    });
  });

  it("a failure while streaming ends with a final event carrying the error; the message stays stored", async () => {
    const app = chatbotApp({
      async *answer() {
        yield { type: "text", text: "half an ans" };
        throw new Error("provider exploded with key sk-should-not-leak");
      },
    });
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const res = await app.request(
      `/v1/chatbot/${id}/run`,
      json({ text: "hi", stream: true }, bearer(org.owner.apiKey)),
    );
    const raw = await res.text();
    expect(raw).not.toContain("sk-should-not-leak");
    const events = sseEvents(raw);
    expect(events[0]).toEqual({ type: "stream", output_value: "half an ans" });
    const final = events[events.length - 1];
    expect(final).toMatchObject({
      status: "failed",
      error: "the chatbot failed to answer",
      conversation_id: expect.stringMatching(/^[0-9a-f]{24}$/),
    });
    const read = await body(
      await app.request(`/chatbots/conversations/${String(final.conversation_id)}`, {
        headers: bearer(org.owner.token),
      }),
    );
    expect(read).toMatchObject({
      conversation: {
        messages: [
          { role: "user", content: "hi", status: "failed" },
          { role: "assistant", status: "failed", error: "the chatbot failed to answer" },
        ],
      },
    });

    const plain = await run(app, org.owner.apiKey, id, { text: "again" });
    expect(plain).toEqual({ status: 500, body: { status: "failed", error: "the chatbot failed to answer" } });
  });
});

describe("chatbots: conversation and settings errors", () => {
  it("feedback needs a value and an answer of this conversation of this chatbot", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const otherBot = await createChatbot(app, org.owner.apiKey);
    const answered = await run(app, org.owner.apiKey, id, { text: "hi" });
    const conversationId = String(answered.body.conversation_id);
    const t = bearer(org.owner.token);
    const like = (fields: Record<string, string>) =>
      app.request(
        "/chatbots/conversations/message/like",
        form(
          { chatbot_id: id, conversation_id: conversationId, message_id: String(answered.body.message_id), ...fields },
          t,
        ),
      );
    const missing = await like({});
    expect(missing.status).toBe(422);
    expect(await body(missing)).toEqual({
      detail: [
        {
          loc: ["body", "like"],
          msg: "give like (true or false) or feedback (like, dislike or none)",
          type: "missing",
        },
      ],
    });
    expect((await like({ like: "perhaps" })).status).toBe(422);
    const unknown = await like({ like: "true", message_id: "0123456789abcdef01234567" });
    expect(unknown.status).toBe(404);
    expect(await body(unknown)).toEqual({ detail: "message not found" });
    const read = await body(await app.request(`/chatbots/conversations/${conversationId}`, { headers: t }));
    const userMessage = (read.conversation as { messages: { _id: string }[] }).messages[0]._id;
    expect(await body(await like({ like: "true", message_id: userMessage }))).toEqual({
      detail: "only the chatbot's answers can be liked or disliked",
    });
    expect((await like({ like: "true", chatbot_id: otherBot })).status).toBe(404);
    const rename = await app.request(
      "/chatbots/conversations/update/name",
      form({ conversation_id: conversationId, name: "" }, t),
    );
    expect(rename.status).toBe(422);
  });

  it("settings validate their fields", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const t = bearer(org.owner.token);
    const post = async (path: string, fields: Record<string, string>) => {
      const res = await app.request(path, form({ chatbot_id: id, ...fields }, t));
      return { status: res.status, body: await body(res) };
    };
    expect(await post("/chatbots/update/access", { mode: "password" })).toEqual({
      status: 400,
      body: { detail: "password: is required when mode is password" },
    });
    expect((await post("/chatbots/update/access", { mode: "secret" })).status).toBe(422);
    expect((await post("/chatbots/update/access", { allowed_origins: "https://a.example/path" })).status).toBe(422);
    expect((await post("/chatbots/update/deployment", { primary_color: "red" })).status).toBe(422);
    expect((await post("/chatbots/update/deployment", { avatar_url: "http://insecure.example/a.png" })).status).toBe(
      422,
    );
    expect(await post("/chatbots/update/rbac", { editors: "0123456789abcdef01234567" })).toEqual({
      status: 400,
      body: { detail: "editors: user 0123456789abcdef01234567 is not in this organization" },
    });
    expect(await post("/chatbots/update/telephony", { enabled: "true" })).toEqual({
      status: 400,
      body: { detail: "auth_token: is required to enable the telephony integration" },
    });
    expect((await post("/chatbots/update/telephony", { phone_number: "555" })).status).toBe(422);
    expect(await post("/chatbots/update/chatworkspace", { enabled: "true", bot_token: "xbot-123456" })).toEqual({
      status: 400,
      body: { detail: "signing_secret: is required to enable the chat workspace integration" },
    });
  });

  it("uploads are capped in type and size", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const upload = async (file: File) => {
      const data = new FormData();
      data.append("file", file);
      const res = await app.request(`/v1/chatbot/${id}/upload`, {
        method: "POST",
        headers: bearer(org.owner.apiKey),
        body: data,
      });
      return { status: res.status, body: await body(res) };
    };
    expect(await upload(new File([new Uint8Array([0x89, 0x50])], "x.png", { type: "image/png" }))).toEqual({
      status: 400,
      body: { status: "failed", error: "file: type image/png is not accepted; send text, markdown, CSV or JSON" },
    });
    expect(
      await upload(new File([new Uint8Array(1024 * 1024 + 1).fill(97)], "big.txt", { type: "text/plain" })),
    ).toEqual({ status: 413, body: { status: "failed", error: "file: must be at most 1048576 bytes" } });
    expect(await upload(new File([new Uint8Array([0xff, 0xfe, 0xfd])], "bad.txt", { type: "text/plain" }))).toEqual({
      status: 400,
      body: { status: "failed", error: "file: is not UTF-8 text" },
    });
    const missing = await app.request(`/v1/chatbot/${id}/upload`, json({}, bearer(org.owner.apiKey)));
    expect(missing.status).toBe(400);

    await deployPublic(app, org.owner.token, id);
    const data = new FormData();
    data.append("chatbot_id", id);
    data.append("file", new File(["x"], "a.txt", { type: "text/plain" }));
    const anonymous = await app.request("/chatbots/upload", { method: "POST", body: data });
    expect(anonymous.status).toBe(401);
  });
});
