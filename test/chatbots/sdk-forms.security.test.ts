import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { createPipeline, SMALLEST } from "../pipelines/fixtures";
import { createKb } from "../knowledge-bases/kb-fixtures";
import { sdkRequest, sdkUpload, type SdkFilePart } from "../sdk/sdk-wire";
import { body } from "./harness";

const SDK_DEFAULTS = {
  deployment_options: {},
  access_config: {},
  twilio_config: {},
  slack_config: {},
  input: "",
  output: "",
  deployed: false,
};

async function kbChatbot(key: string, kbIds: string[] = []): Promise<string> {
  const created = await sdkRequest(key, "POST", "/chatbot", {
    json: {
      name: `bot-${crypto.randomUUID()}`,
      system_prompt: "Answer.",
      ...(kbIds.length ? { knowledge_base_ids: kbIds } : {}),
    },
  });
  if (created.status !== 200) throw new Error(JSON.stringify(created.body));
  return String(created.body.id);
}

const text = (field: string, filename: string, content: string): SdkFilePart => ({
  field,
  filename,
  content,
  contentType: "text/plain",
});

describe("chatbots: the SDK's Chatbot.new keeps the integration rule", () => {
  it("a member cannot set telephony or chat-workspace secrets or the workspace URL through new's option objects; nothing is created; an admin can", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const admin = await org.addMember("admin");
    const pipelineId = await createPipeline(org.owner.apiKey, SMALLEST);
    const attempts: [Record<string, unknown>, string][] = [
      [{ twilio_config: { account_sid: "AC1", auth_token: "member-chosen-token" } }, "auth_token"],
      [{ slack_config: { team_id: "T1", signing_secret: "member-chosen-signing" } }, "signing_secret"],
      [{ slack_config: { bot_token: "xoxb-member-chosen" } }, "bot_token"],
      [{ slack_config: { api_base_url: "https://api.slack.com/api" } }, "api_base_url"],
    ];
    for (const [options, named] of attempts) {
      const name = `bot-${crypto.randomUUID()}`;
      const res = await sdkRequest(member.apiKey, "POST", "/chatbot", {
        json: { name, description: "", pipeline: { id: pipelineId }, ...SDK_DEFAULTS, ...options },
      });
      expect(res, named).toEqual({
        status: 403,
        body: { status: "failed", error: `only an owner or admin of the organization can change ${named}` },
      });
      expect((await sdkRequest(member.apiKey, "GET", "/chatbot", { query: { name } })).status).toBe(404);
    }
    // Settings without secrets are the member's to choose; an admin may set the secrets.
    expect(
      (
        await sdkRequest(member.apiKey, "POST", "/chatbot", {
          json: {
            name: `bot-${crypto.randomUUID()}`,
            description: "",
            pipeline: { id: pipelineId },
            ...SDK_DEFAULTS,
            twilio_config: { account_sid: "AC1" },
            slack_config: { team_id: "T1" },
          },
        })
      ).status,
    ).toBe(200);
    const byAdmin = await sdkRequest(admin.apiKey, "POST", "/chatbot", {
      json: {
        name: `bot-${crypto.randomUUID()}`,
        description: "",
        pipeline: { id: pipelineId },
        ...SDK_DEFAULTS,
        twilio_config: { auth_token: "admin-token-1234" },
      },
    });
    expect(byAdmin.status).toBe(200);
  });

  it("the SDK's fields of a record show only whether a secret is set and its last four", async () => {
    const org = await seedOrg();
    const id = await kbChatbot(org.owner.apiKey);
    await call(
      "/chatbots/update/telephony",
      form({ chatbot_id: id, account_sid: "AC9", auth_token: "telephony-canary-7777" }, bearer(org.owner.token)),
    );
    await call(
      "/chatbots/update/chatworkspace",
      form(
        { chatbot_id: id, signing_secret: "signing-canary-secret", bot_token: "xoxb-bot-canary-8888" },
        bearer(org.owner.token),
      ),
    );
    await call(
      "/chatbots/update/access",
      form({ chatbot_id: id, mode: "password", password: "password-canary" }, bearer(org.owner.token)),
    );
    const fetched = await sdkRequest(org.owner.apiKey, "GET", "/chatbot", { query: { id } });
    expect(fetched.body.object).toMatchObject({
      access_config: { mode: "password", has_password: true },
      twilio_config: { account_sid: "AC9", has_auth_token: true, auth_token_last_four: "7777" },
      slack_config: { has_signing_secret: true, has_bot_token: true, bot_token_last_four: "8888" },
    });
    const everything =
      JSON.stringify(fetched.body) +
      JSON.stringify(
        await body(await call("/v1/chatbots?include_shared=true&verbose=true", { headers: bearer(org.owner.apiKey) })),
      );
    for (const secret of ["telephony-canary-7777", "signing-canary-secret", "xoxb-bot-canary-8888", "password-canary"])
      expect(everything).not.toContain(secret);
  });
});

describe("chatbots: run's filter", () => {
  it("another organization's knowledge base cannot be named in a filter (the same 400 as an unknown id), nor its chatbot run with one (404)", async () => {
    const owner = await seedOrg();
    const other = await seedOrg();
    const theirKb = await createKb(other.owner.apiKey);
    const id = await kbChatbot(owner.owner.apiKey, [await createKb(owner.owner.apiKey)]);
    const item = (objectId: string) => ({
      filter_items: [
        { object_id: objectId, item_id: null, document_id: null, is_integration_item_directory: null, object_type: 0 },
      ],
      selection_mode: 1,
    });
    const foreign = await sdkRequest(owner.owner.apiKey, "POST", `/chatbot/${id}/run`, {
      json: { text: "hi", filter: item(theirKb) },
    });
    const unknown = await sdkRequest(owner.owner.apiKey, "POST", `/chatbot/${id}/run`, {
      json: { text: "hi", filter: item("0123456789abcdef01234567") },
    });
    expect(foreign).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "filter.filter_items[0].object_id: must be the id of one of this chatbot's knowledge bases",
      },
    });
    expect(unknown).toEqual(foreign);
    expect(
      (
        await sdkRequest(other.owner.apiKey, "POST", `/chatbot/${id}/run`, {
          json: { text: "hi", filter: item(theirKb) },
        })
      ).status,
    ).toBe(404);
  });

  it("a filter the chatbot cannot honour is a clear 400, never ignored: pipelines, visitors, integrations, bad filters, too many items", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    const id = await kbChatbot(key, [kb]);
    const runWith = (filter: unknown, chatbot = id) =>
      sdkRequest(key, "POST", `/chatbot/${chatbot}/run`, { json: { text: "hi", filter } });
    const pipelineBot = String(
      (
        await sdkRequest(key, "POST", "/chatbot", {
          json: {
            name: `p-${crypto.randomUUID()}`,
            pipeline: { id: await createPipeline(key, SMALLEST) },
            ...SDK_DEFAULTS,
          },
        })
      ).body.id,
    );
    expect(await runWith({ filter_items: [], selection_mode: 0 }, pipelineBot)).toEqual({
      status: 400,
      body: {
        status: "failed",
        error:
          "filter: narrows a knowledge-base chatbot's search; this chatbot answers through a pipeline, which takes no filter",
      },
    });
    expect((await runWith({ filter_items: [{ object_id: kb, object_type: 2 }], selection_mode: 1 })).body).toEqual({
      status: "failed",
      error:
        "filter.filter_items[0].object_type: integration is not available in Loom (it has no integrations or knowledge-base folders); select knowledge bases or their documents",
    });
    expect((await runWith({ filter_items: [{ object_id: kb, object_type: 9 }], selection_mode: 1 })).status).toBe(400);
    expect((await runWith({ filter_items: [], selection_mode: 7 })).body).toEqual({
      status: "failed",
      error: "filter.selection_mode: must be one of 0 (deselect), 1 (select)",
    });
    expect(
      (
        await runWith({
          filter_items: [{ object_id: kb, object_type: 1, document_id: "not-an-id" }],
          selection_mode: 1,
        })
      ).body,
    ).toEqual({ status: "failed", error: "filter.filter_items[0].document_id: must be a document id" });
    const many = Array.from({ length: 101 }, () => ({ object_id: kb, object_type: 0 }));
    expect((await runWith({ filter_items: many, selection_mode: 1 })).body).toEqual({
      status: "failed",
      error: "filter.filter_items: at most 100 items",
    });
    expect((await runWith({ should_not: [] })).body).toEqual({
      status: "failed",
      error: "filter: at should_not: unknown clause (use must, should, must_not)",
    });
    expect((await runWith("{not json")).status).toBe(400);
    // Nothing was stored for any refused message.
    const conversations = await body(
      await call(`/chatbots/conversations?chatbot_id=${id}`, { headers: bearer(org.owner.token) }),
    );
    expect(conversations.conversations).toEqual([]);

    await call("/chatbots/deploy", form({ chatbot_id: id }, bearer(org.owner.token)));
    const visitor = await call(
      `/chatbots/deployed/${id}/run`,
      json({ text: "hi", filter: { must: [{ key: "secret", match: { value: "x" } }] } }),
    );
    expect(visitor.status).toBe(400);
    expect(await body(visitor)).toEqual({ detail: "filter: is not available to visitors of a deployed chatbot" });
  });
});

describe("chatbots: the SDK's upload_files", () => {
  it("another organization's chatbot or conversation is a 404 for the files form too", async () => {
    const owner = await seedOrg();
    const other = await seedOrg();
    const id = await kbChatbot(owner.owner.apiKey);
    const mine = await sdkUpload(
      owner.owner.apiKey,
      `/chatbot/${id}/upload`,
      [["message_index", "0"]],
      [text("files", "a.txt", "mine")],
    );
    const conversationId = String(mine.body.conversation_id);
    expect(
      (
        await sdkUpload(
          other.owner.apiKey,
          `/chatbot/${id}/upload`,
          [["message_index", "0"]],
          [text("files", "a.txt", "theirs")],
        )
      ).status,
    ).toBe(404);
    const theirBot = await kbChatbot(other.owner.apiKey);
    const intoMine = await sdkUpload(
      other.owner.apiKey,
      `/chatbot/${theirBot}/upload`,
      [
        ["conversation_id", conversationId],
        ["message_index", "0"],
      ],
      [text("files", "a.txt", "theirs")],
    );
    expect(intoMine).toEqual({ status: 404, body: { status: "failed", error: "conversation not found" } });
  });

  it("the number, size, type and encoding of files are bounded; one bad file leaves nothing behind", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await kbChatbot(key);
    const upload = (files: SdkFilePart[], fields: [string, string][] = [["message_index", "0"]]) =>
      sdkUpload(key, `/chatbot/${id}/upload`, fields, files);
    const eleven = Array.from({ length: 11 }, (_, i) => text("files", `f${i}.txt`, `file ${i}`));
    expect(await upload(eleven)).toEqual({
      status: 400,
      body: { status: "failed", error: "files: at most 10 files at once" },
    });
    expect(
      await upload([
        text("files", "ok.txt", "fine"),
        { field: "files", filename: "x.png", content: new Uint8Array([0x89, 0x50]), contentType: "image/png" },
      ]),
    ).toEqual({
      status: 400,
      body: { status: "failed", error: "files[1]: type image/png is not accepted; send text, markdown, CSV or JSON" },
    });
    expect(
      await upload([text("files", "ok.txt", "fine"), text("files", "big.txt", "a".repeat(1024 * 1024 + 1))]),
    ).toEqual({ status: 413, body: { status: "failed", error: "files[1]: must be at most 1048576 bytes" } });
    expect(
      await upload([
        { field: "files", filename: "bad.txt", content: new Uint8Array([0xff, 0xfe, 0xfd]), contentType: "text/plain" },
      ]),
    ).toEqual({ status: 400, body: { status: "failed", error: "files: is not UTF-8 text" } });
    expect(await upload([text("files", "empty.txt", "")])).toEqual({
      status: 400,
      body: { status: "failed", error: "files: is empty" },
    });
    expect(await upload([text("file", "a.txt", "one"), text("files", "b.txt", "two")])).toEqual({
      status: 400,
      body: { status: "failed", error: "give file or files, not both" },
    });
    expect((await upload([], [["message_index", "0"]])).status).toBe(400);
    expect((await upload([text("files", "a.txt", "x")], [["message_index", "-1"]])).status).toBe(400);
    // No refused upload started a conversation or stored a file.
    const conversations = await body(
      await call(`/chatbots/conversations?chatbot_id=${id}`, { headers: bearer(org.owner.token) }),
    );
    expect(conversations.conversations).toEqual([]);
  });
});
