import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import {
  TELEPHONY_TOKEN,
  WORKSPACE_BOT_TOKEN,
  WORKSPACE_SIGNING,
  signTelephony,
  signWorkspace,
} from "./webhook-signing";
import { conversationNameFrom, countTokens, cutHistory } from "../../src/features/chatbots/history-budget";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { SMALLEST, createPipeline } from "../pipelines/fixtures";
import { env } from "cloudflare:test";
import { productionChatbotServices } from "../../src/features/chatbots/chatbot-services";
import { KB_SOURCE, body, chatbotApp, createChatbot, deployPublic, run, sseEvents, untilStored } from "./harness";

describe("chatbots: records", () => {
  it("creates, fetches by id and name, lists and deletes a chatbot (Group A)", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey, { name: "helper" });
    expect(id).toMatch(/^[0-9a-f]{24}$/);

    const byId = await body(await app.request(`/v1/chatbot?id=${id}`, { headers: bearer(org.owner.apiKey) }));
    expect(byId).toMatchObject({
      status: "success",
      object: {
        _id: id,
        name: "helper",
        description: "a test bot",
        systemPrompt: "Be brief.",
        followUpQuestions: 2,
        ownerId: org.owner.userId,
        orgId: org.orgId,
        deployed: false,
      },
    });
    const byName = await body(await app.request(`/v1/chatbot?name=helper`, { headers: bearer(org.owner.apiKey) }));
    expect(byName).toMatchObject({ object: { _id: id } });

    const list = await body(await app.request(`/v1/chatbots?verbose=true`, { headers: bearer(org.owner.apiKey) }));
    expect(list).toMatchObject({ status: "success", object_ids: [id] });
    expect((list.objects as unknown[]).length).toBe(1);
    const terse = await body(await app.request(`/v1/chatbots`, { headers: bearer(org.owner.apiKey) }));
    expect(terse).toEqual({ status: "success", object_ids: [id], objects: [] });

    const deleted = await app.request(`/v1/chatbot/${id}`, { method: "DELETE", headers: bearer(org.owner.apiKey) });
    expect(await body(deleted)).toEqual({ status: "success" });
    expect((await app.request(`/v1/chatbot?id=${id}`, { headers: bearer(org.owner.apiKey) })).status).toBe(404);
  });

  it("creates, reads, lists and deletes through Group B form routes; include_shared shows colleagues' chatbots", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const member = await org.addMember("member");
    const pipelineId = await createPipeline(member.apiKey, SMALLEST);
    const created = await body(
      await app.request(
        "/chatbots/create",
        form(
          {
            name: "support",
            description: "answers",
            pipeline: JSON.stringify({ id: pipelineId, input: "q", output: "answer" }),
          },
          bearer(member.token),
        ),
      ),
    );
    expect(created).toMatchObject({
      status: "success",
      chatbot: { name: "support", pipeline: { id: pipelineId, input: "q", output: "answer" } },
    });
    const id = String(created.id);
    expect(await body(await app.request(`/chatbots/${id}`, { headers: bearer(org.owner.token) }))).toMatchObject({
      object: { _id: id },
    });
    expect(await body(await app.request(`/chatbots`, { headers: bearer(org.owner.token) }))).toMatchObject({
      object_ids: [],
    });
    expect(
      await body(await app.request(`/chatbots?include_shared=true`, { headers: bearer(org.owner.token) })),
    ).toMatchObject({ object_ids: [id] });
    const removed = await app.request("/chatbots/delete", form({ chatbot_id: id }, bearer(member.token), "DELETE"));
    expect(await body(removed)).toEqual({ status: "success" });
  });
});

describe("chatbots: running", () => {
  it("answers text, names the conversation from its first message, and gives later turns the history", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const first = await run(app, org.owner.apiKey, id, { text: "What is Loom?" });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      status: "success",
      output_message: "Answer to What is Loom? (after 0 messages)",
      follow_up_questions: ["What else?", "Why?"],
      answered_by: "loom/extractive",
    });
    const conversationId = String(first.body.conversation_id);
    expect(conversationId).toMatch(/^[0-9a-f]{24}$/);

    const second = await run(app, org.owner.apiKey, id, { text: "And then?", conversation_id: conversationId });
    expect(second.body).toMatchObject({
      conversation_id: conversationId,
      output_message: "Answer to And then? (after 2 messages)",
    });
    expect(app.recorded.answers[1].history).toEqual([
      { role: "user", content: "What is Loom?" },
      { role: "assistant", content: "Answer to What is Loom? (after 0 messages)" },
    ]);
    expect(app.recorded.answers[1].systemPrompt).toBe("Be brief.");

    const listed = await body(
      await app.request(`/chatbots/conversations?chatbot_id=${id}`, { headers: bearer(org.owner.token) }),
    );
    expect(listed).toMatchObject({
      status: "success",
      conversations: [{ _id: conversationId, name: "What is Loom?", messageCount: 4, chatbotId: id }],
    });
  });

  it("streams server-sent events: each new piece as {type: stream, output_value}, then the final result", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const res = await app.request(
      `/v1/chatbot/${id}/run`,
      json({ text: "Stream please", stream: true }, bearer(org.owner.apiKey)),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = sseEvents(await res.text());
    const pieces = events.filter((e) => e.type === "stream");
    expect(pieces.length).toBeGreaterThan(3);
    for (const piece of pieces) expect(Object.keys(piece).sort()).toEqual(["output_value", "type"]);
    const final = events[events.length - 1];
    expect(final).toMatchObject({
      status: "success",
      output_message: "Answer to Stream please (after 0 messages)",
      follow_up_questions: ["What else?", "Why?"],
    });
    expect(pieces.map((p) => p.output_value).join("")).toBe(final.output_message);
    expect(String(final.conversation_id)).toMatch(/^[0-9a-f]{24}$/);
  });

  it("transcribes base64 audio and a multipart audio file with the speech-to-text service", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const spoken = await run(app, org.owner.apiKey, id, {
      audio: btoa("hello from audio"),
      audio_mime_type: "audio/wav",
    });
    expect(spoken.body).toMatchObject({
      status: "success",
      output_message: "Answer to hello from audio (after 0 messages)",
    });
    expect(app.recorded.transcribed[0]).toEqual({ mimeType: "audio/wav", size: 16 });

    const multipart = new FormData();
    multipart.append("audio", new File([new TextEncoder().encode("file speech")], "clip.webm", { type: "audio/webm" }));
    multipart.append("conversation_id", String(spoken.body.conversation_id));
    const res = await app.request(`/v1/chatbot/${id}/run`, {
      method: "POST",
      headers: bearer(org.owner.apiKey),
      body: multipart,
    });
    expect(await body(res)).toMatchObject({
      status: "success",
      conversation_id: spoken.body.conversation_id,
      output_message: "Answer to file speech (after 2 messages)",
    });
    expect(app.recorded.transcribed[1]).toEqual({ mimeType: "audio/webm", size: 11 });
  });

  it("answers messages sent at once to one conversation one after another: all stored, in order", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const first = await run(app, org.owner.apiKey, id, { text: "m0" });
    const conversationId = String(first.body.conversation_id);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        run(app, org.owner.apiKey, id, { text: `m${i + 1}`, conversation_id: conversationId }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);

    const read = await body(
      await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(org.owner.token) }),
    );
    const messages = (
      read.conversation as { messages: { _id: string; role: string; content: string; replyTo: string | null }[] }
    ).messages;
    expect(messages).toHaveLength(18);
    const users = messages.filter((m) => m.role === "user").map((m) => m.content);
    expect(users.sort()).toEqual(Array.from({ length: 9 }, (_, i) => `m${i}`).sort());
    // Strictly alternating, and each answer saw every earlier turn: answered one after another.
    messages.forEach((message, index) => {
      expect(message.role).toBe(index % 2 === 0 ? "user" : "assistant");
      if (index % 2 === 1) {
        expect(message.replyTo).toBe(messages[index - 1]._id);
        expect(message.content).toBe(`Answer to ${messages[index - 1].content} (after ${index - 1} messages)`);
      }
    });
    expect(read.conversation).toMatchObject({ messageCount: 18 });
    // The last turn's history is the conversation in order: question, its answer, question ...
    const lastHistory = app.recorded.answers[app.recorded.answers.length - 1].history;
    expect(lastHistory.map((m) => m.role)).toEqual(
      Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? "user" : "assistant")),
    );
    expect(lastHistory.map((m) => m.content)).toEqual(messages.slice(0, 16).map((m) => m.content));
  });

  it("answers through a pipeline when the chatbot has one", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const pipelineId = await createPipeline(org.owner.apiKey, SMALLEST);
    const id = await createChatbot(app, org.owner.apiKey, {
      system_prompt: undefined,
      pipeline: { id: pipelineId, output: "answer" },
    });
    const answered = await run(app, org.owner.apiKey, id, { text: "ping" });
    expect(answered.body).toMatchObject({
      status: "success",
      output_message: "pipeline says ping",
      answered_by: `pipeline/${pipelineId}`,
    });
  });

  it("runs a real pipeline per message through the real Worker, for a visitor too (owner's rights)", async () => {
    const org = await seedOrg();
    const pipelineId = await createPipeline(org.owner.apiKey, SMALLEST);
    const created = await body(
      await call(
        "/v1/chatbot",
        json(
          { name: "greeter", description: "greets", pipeline: { id: pipelineId, input: "q", output: "answer" } },
          bearer(org.owner.apiKey),
        ),
      ),
    );
    const id = String(created.id);
    const answered = await body(await call(`/v1/chatbot/${id}/run`, json({ text: "world" }, bearer(org.owner.apiKey))));
    expect(answered).toMatchObject({
      status: "success",
      output_message: "Hello world",
      answered_by: `pipeline/${pipelineId}`,
    });
    await call("/chatbots/deploy", form({ chatbot_id: id }, bearer(org.owner.token)));
    const visitor = await body(await call(`/chatbots/deployed/${id}/run`, json({ text: "visitor" })));
    expect(visitor).toMatchObject({ status: "success", output_message: "Hello visitor" });
  });

  it("answers from knowledge bases with their sources", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    const id = await createChatbot(app, org.owner.apiKey, { knowledge_base_ids: [kb], query_options: { top_k: 3 } });
    const answered = await run(app, org.owner.apiKey, id, { text: "How are messages stored?" });
    expect(answered.body).toMatchObject({ status: "success", sources: [KB_SOURCE] });
    expect(app.recorded.answers[0].sources).toEqual([KB_SOURCE]);
  });

  it("queries real knowledge bases with the owner's rights, best passages first (production knowledge-base wiring)", async () => {
    const production = productionChatbotServices(env, {});
    const app = chatbotApp({ queryKnowledgeBases: production.queryKnowledgeBases });
    const org = await seedOrg();
    const glaciers = await createKb(org.owner.apiKey);
    const deserts = await createKb(org.owner.apiKey);
    await indexText(
      org.owner.apiKey,
      glaciers,
      "ice.txt",
      "Glaciers carve valleys and leave moraines behind when they retreat.",
    );
    await indexText(org.owner.apiKey, deserts, "sand.txt", "Deserts receive very little rain and have sparse plants.");
    const id = await createChatbot(app, org.owner.apiKey, {
      knowledge_base_ids: [glaciers, deserts],
      query_options: { top_k: 2 },
    });
    await deployPublic(app, org.owner.token, id, { show_sources: "true" });
    // A visitor has no account: the passages are read with the chatbot owner's rights.
    const answered = await body(
      await app.request(
        `/chatbots/deployed/${id}/run`,
        json({ text: "What do glaciers leave behind when they retreat?" }),
      ),
    );
    const sources = answered.sources as { knowledgeBaseId: string; name: string; text: string; score: number }[];
    expect(sources.length).toBeGreaterThan(0);
    expect(sources[0]).toMatchObject({ knowledgeBaseId: glaciers, name: "ice.txt" });
    expect(sources[0].text).toContain("moraines");
    expect(sources.map((s) => s.score)).toEqual([...sources.map((s) => s.score)].sort((a, b) => b - a));
    expect(app.recorded.answers[0].sources).toEqual(sources);
  });

  it("with no model, the offline extractive answerer replies from the knowledge base through the real Worker, labelled as such, streaming too", async () => {
    const org = await seedOrg();
    const kb = await createKb(org.owner.apiKey);
    await indexText(
      org.owner.apiKey,
      kb,
      "ice.txt",
      "Glaciers carve valleys. When they retreat, glaciers leave moraines of rock and gravel behind.",
    );
    const created = await body(
      await call(
        "/v1/chatbot",
        json({ name: "geo", description: "geology", knowledge_base_ids: [kb] }, bearer(org.owner.apiKey)),
      ),
    );
    const id = String(created.id);
    const res = await call(
      `/v1/chatbot/${id}/run`,
      json({ text: "What do glaciers leave behind when they retreat?" }, bearer(org.owner.apiKey)),
    );
    const answered = await body(res);
    expect(res.status).toBe(200);
    expect(answered).toMatchObject({ status: "success", answered_by: "loom/extractive", follow_up_questions: [] });
    expect(String(answered.output_message)).toContain("moraines");
    expect((answered.sources as { knowledgeBaseId: string }[])[0]).toMatchObject({ knowledgeBaseId: kb });

    const streamed = await call(
      `/v1/chatbot/${id}/run`,
      json(
        { text: "What do glaciers carve?", conversation_id: answered.conversation_id, stream: true },
        bearer(org.owner.apiKey),
      ),
    );
    const events = sseEvents(await streamed.text());
    const final = events[events.length - 1];
    expect(final).toMatchObject({
      status: "success",
      answered_by: "loom/extractive",
      conversation_id: answered.conversation_id,
    });
    expect(
      events
        .filter((e) => e.type === "stream")
        .map((e) => e.output_value)
        .join(""),
    ).toBe(final.output_message);
  });

  it("terminates the answer in progress and any message waiting behind it", async () => {
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered = (): void => undefined;
    const inAnswer = new Promise<void>((resolve) => (entered = resolve));
    const app = chatbotApp({
      async *answer(input) {
        yield { type: "text", text: "partial" };
        if (input.question === "slow") {
          entered();
          await gate;
        }
        yield { type: "text", text: " more" };
        yield { type: "done", text: "partial more", answeredBy: "test", followUpQuestions: [] };
      },
    });
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const first = await run(app, org.owner.apiKey, id, { text: "start" });
    const conversationId = String(first.body.conversation_id);
    const slow = run(app, org.owner.apiKey, id, { text: "slow", conversation_id: conversationId });
    // Ordered by the conversation itself: "slow" is being answered, then "queued" waits behind it.
    await inAnswer;
    const queued = run(app, org.owner.apiKey, id, { text: "queued", conversation_id: conversationId });
    await untilStored(conversationId, (messages) => messages.some((m) => m.content === "queued"));
    const stopped = await app.request(
      `/v1/chatbot/${id}/terminate`,
      json({ conversation_id: conversationId }, bearer(org.owner.apiKey)),
    );
    expect(await body(stopped)).toEqual({ status: "success", terminated: 2 });
    release();
    expect((await slow).body).toMatchObject({ status: "success", error: "terminated" });
    const waiting = await queued;
    expect(waiting.status).toBe(409);
    expect(waiting.body).toEqual({
      status: "failed",
      error: "the conversation was terminated before this message was answered",
    });
    const read = await body(
      await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(org.owner.token) }),
    );
    const statuses = (
      read.conversation as { messages: { status: string; content: string; role: string }[] }
    ).messages.map((m) => `${m.role}:${m.content}:${m.status}`);
    expect(statuses).toEqual([
      "user:start:complete",
      "assistant:partial more:complete",
      "user:slow:terminated",
      "assistant:partial more:terminated",
      "user:queued:terminated",
      "assistant::terminated",
    ]);
    // The conversation goes on after a termination.
    expect((await run(app, org.owner.apiKey, id, { text: "after", conversation_id: conversationId })).status).toBe(200);
  });
});

describe("chatbots: conversations (Group B)", () => {
  it("reads, renames, likes an answer, and deletes a conversation", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const answered = await run(app, org.owner.apiKey, id, { text: "Hello there" });
    const conversationId = String(answered.body.conversation_id);
    const messageId = String(answered.body.message_id);

    const renamed = await body(
      await app.request(
        "/chatbots/conversations/update/name",
        form({ conversation_id: conversationId, name: "Greetings" }, bearer(org.owner.token)),
      ),
    );
    expect(renamed).toMatchObject({ status: "success", conversation: { _id: conversationId, name: "Greetings" } });

    const liked = await body(
      await app.request(
        "/chatbots/conversations/message/like",
        form(
          { chatbot_id: id, conversation_id: conversationId, message_id: messageId, like: "true" },
          bearer(org.owner.token),
        ),
      ),
    );
    expect(liked).toEqual({ status: "success", message_id: messageId, feedback: "like" });
    await app.request(
      "/chatbots/conversations/message/like",
      form(
        { chatbot_id: id, conversation_id: conversationId, message_id: messageId, feedback: "dislike" },
        bearer(org.owner.token),
      ),
    );

    const read = await body(
      await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(org.owner.token) }),
    );
    expect(read).toMatchObject({
      status: "success",
      conversation: {
        _id: conversationId,
        name: "Greetings",
        messages: [
          { role: "user", content: "Hello there" },
          { _id: messageId, role: "assistant", feedback: "dislike" },
        ],
      },
    });

    const deleted = await app.request(
      "/chatbots/conversations/delete",
      form({ conversation_id: conversationId }, bearer(org.owner.token), "DELETE"),
    );
    expect(await body(deleted)).toEqual({ status: "success" });
    expect(
      (await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(org.owner.token) })).status,
    ).toBe(404);
  });

  it("attaches a document to a conversation; later answers receive its text", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const upload = new FormData();
    upload.append("file", new File(["Refunds take 5 days."], "policy.md", { type: "text/markdown" }));
    const res = await app.request(`/v1/chatbot/${id}/upload`, {
      method: "POST",
      headers: bearer(org.owner.apiKey),
      body: upload,
    });
    const uploaded = await body(res);
    expect(uploaded).toMatchObject({
      status: "success",
      attachment: { name: "policy.md", mimeType: "text/markdown", size: 20 },
    });
    await run(app, org.owner.apiKey, id, {
      text: "How long do refunds take?",
      conversation_id: uploaded.conversation_id,
    });
    expect(app.recorded.answers[0].attachments).toEqual([{ name: "policy.md", text: "Refunds take 5 days." }]);
  });
});

describe("chatbots: deployment and the public surface", () => {
  it("deploys with presentation settings, shows a public profile, and lets a visitor talk with a signed session", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey, { knowledge_base_ids: [await createKb(org.owner.apiKey)] });
    await deployPublic(app, org.owner.token, id, {
      display_name: "Helpdesk",
      greeting: "Hi!",
      primary_color: "#112233",
      suggested_questions: JSON.stringify(["Prices?"]),
      show_sources: "true",
    });

    const profile = await body(await app.request(`/chatbots/deployed/${id}`));
    expect(profile).toEqual({
      status: "success",
      chatbot: {
        _id: id,
        name: "Helpdesk",
        description: "a test bot",
        greeting: "Hi!",
        primaryColor: "#112233",
        secondaryColor: null,
        avatarUrl: null,
        suggestedQuestions: ["Prices?"],
        showSources: true,
        position: "right",
        access: { mode: "public" },
        followUpQuestions: true,
        allowUploads: true,
        speechToText: true,
      },
    });

    const first = await app.request(`/chatbots/deployed/${id}/run`, json({ text: "Hi bot" }));
    const answered = await body(first);
    expect(answered).toMatchObject({
      status: "success",
      output_message: "Answer to Hi bot (after 0 messages)",
      sources: [KB_SOURCE],
    });
    const session = String(answered.visitor_session);
    expect(first.headers.get("x-visitor-session")).toBe(session);

    const again = await body(
      await app.request(
        `/chatbots/deployed/${id}/run`,
        json({ text: "More", conversation_id: answered.conversation_id }, { "x-visitor-session": session }),
      ),
    );
    expect(again).toMatchObject({
      status: "success",
      conversation_id: answered.conversation_id,
      output_message: "Answer to More (after 2 messages)",
    });
    expect(again.visitor_session).toBeUndefined();

    const mine = await body(
      await app.request(`/chatbots/deployed/${id}/conversations`, { headers: { "x-visitor-session": session } }),
    );
    expect(mine).toMatchObject({ conversations: [{ _id: answered.conversation_id, messageCount: 4 }] });
    const liked = await app.request(
      "/chatbots/deployed/conversations/message/like",
      form(
        {
          chatbot_id: id,
          conversation_id: String(answered.conversation_id),
          message_id: String(answered.message_id),
          like: "false",
        },
        { "x-visitor-session": session },
      ),
    );
    expect(await body(liked)).toMatchObject({ status: "success", feedback: "dislike" });

    const upload = new FormData();
    upload.append("chatbot_id", id);
    upload.append("conversation_id", String(answered.conversation_id));
    upload.append("file", new File(["a,b\n1,2\n"], "data.csv", { type: "text/csv" }));
    const uploaded = await app.request("/chatbots/upload", {
      method: "POST",
      headers: { "x-visitor-session": session },
      body: upload,
    });
    expect(await body(uploaded)).toMatchObject({
      status: "success",
      conversation_id: answered.conversation_id,
      attachment: { name: "data.csv" },
    });

    const streamed = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ text: "streamed", stream: true }, { "x-visitor-session": session }),
    );
    const events = sseEvents(await streamed.text());
    expect(events[0]).toMatchObject({ type: "stream" });
    expect(events[events.length - 1]).toMatchObject({ status: "success" });

    const undeployed = await app.request(`/chatbots/undeploy/${id}`, {
      method: "DELETE",
      headers: bearer(org.owner.token),
    });
    expect(await body(undeployed)).toMatchObject({ status: "success", deployed: false });
    expect((await app.request(`/chatbots/deployed/${id}`)).status).toBe(404);
  });

  it("password access: a session needs the password; members access: a member's token", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request(
      "/chatbots/update/access",
      form({ chatbot_id: id, mode: "password", password: "open sesame" }, bearer(org.owner.token)),
    );
    const session = await body(
      await app.request(`/chatbots/deployed/${id}/session`, json({ password: "open sesame" })),
    );
    expect(session).toMatchObject({ status: "success" });
    const answered = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ text: "hi", visitor_session: session.visitor_session }),
    );
    expect(answered.status).toBe(200);

    await app.request("/chatbots/update/access", form({ chatbot_id: id, mode: "members" }, bearer(org.owner.token)));
    const member = await org.addMember("viewer");
    const memberSession = await body(
      await app.request(`/chatbots/deployed/${id}/session`, { method: "POST", headers: bearer(member.token) }),
    );
    const ran = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ text: "hi" }, { "x-visitor-session": String(memberSession.visitor_session) }),
    );
    expect(ran.status).toBe(200);
  });

  it("updates deployment, access, rbac, telephony and chat workspace settings; secrets show only that they are set", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const member = await org.addMember("member");
    const id = await createChatbot(app, org.owner.apiKey);
    const t = bearer(org.owner.token);
    expect(
      await body(
        await app.request(
          "/chatbots/update/deployment",
          form({ chatbot_id: id, greeting: "Welcome", browser_extension: "true" }, t),
        ),
      ),
    ).toMatchObject({ object: { deployment: { greeting: "Welcome" }, browserExtension: true } });
    expect(
      await body(
        await app.request(
          "/chatbots/update/access",
          form(
            { chatbot_id: id, allowed_origins: JSON.stringify(["https://example.com"]), rate_limit_per_minute: "5" },
            t,
          ),
        ),
      ),
    ).toMatchObject({
      object: {
        access: { mode: "public", allowedOrigins: ["https://example.com"], rateLimitPerMinute: 5, hasPassword: false },
      },
    });
    expect(
      await body(
        await app.request(
          "/chatbots/update/rbac",
          form({ chatbot_id: id, editors: member.userId, runner_roles: JSON.stringify(["admin"]) }, t),
        ),
      ),
    ).toMatchObject({ object: { rbac: { editors: [member.userId], runner_roles: ["admin"] } } });
    const phone = await body(
      await app.request(
        "/chatbots/update/telephony",
        form(
          {
            chatbot_id: id,
            account_sid: "AC123",
            auth_token: "tok-secret-9876",
            phone_number: "+15551234567",
            enabled: "true",
          },
          t,
        ),
      ),
    );
    expect(phone).toMatchObject({
      object: {
        telephony: {
          accountSid: "AC123",
          phoneNumber: "+15551234567",
          enabled: true,
          hasAuthToken: true,
          authTokenLastFour: "9876",
        },
      },
    });
    expect(JSON.stringify(phone)).not.toContain("tok-secret");
    const ws = await body(
      await app.request(
        "/chatbots/update/chatworkspace",
        form(
          {
            chatbot_id: id,
            team_id: "T1",
            signing_secret: "sign-secret-1",
            bot_token: "xbot-token-4321",
            enabled: "true",
          },
          t,
        ),
      ),
    );
    expect(ws).toMatchObject({
      object: {
        chatworkspace: {
          teamId: "T1",
          enabled: true,
          hasSigningSecret: true,
          hasBotToken: true,
          botTokenLastFour: "4321",
        },
      },
    });
    expect(JSON.stringify(ws)).not.toContain("sign-secret");

    // The member named as editor may now change it.
    expect(
      (
        await app.request(
          "/chatbots/update/deployment",
          form({ chatbot_id: id, greeting: "Edited" }, bearer(member.token)),
        )
      ).status,
    ).toBe(200);
    const extension = await body(await app.request("/chatbots/browser-extension-chatbots", { headers: t }));
    expect(extension).toMatchObject({ status: "success", chatbots: [{ _id: id }] });
  });
});

describe("chatbots: inbound webhooks", () => {
  it("telephony: a signed SMS is answered in the provider's XML, in the caller's own conversation", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/telephony",
      form(
        { chatbot_id: id, auth_token: TELEPHONY_TOKEN, phone_number: "+15550001111", enabled: "true" },
        bearer(org.owner.token),
      ),
    );
    const url = `http://loom.test/chatbots/webhooks/telephony/${id}`;
    const send = async (params: Record<string, string>) => {
      const signature = await signTelephony(TELEPHONY_TOKEN, url, params);
      return app.request(`/chatbots/webhooks/telephony/${id}`, form(params, { "x-telephony-signature": signature }));
    };
    const res = await send({
      From: "+15559998888",
      To: "+15550001111",
      Body: "Opening hours <today>?",
      MessageSid: "SM1",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/xml");
    expect(await res.text()).toBe(
      '<?xml version="1.0" encoding="UTF-8"?><Response><Message>Answer to Opening hours &lt;today&gt;? (after 0 messages)</Message></Response>',
    );
    const next = await send({ From: "+15559998888", To: "+15550001111", Body: "Thanks", MessageSid: "SM2" });
    expect(await next.text()).toContain("Answer to Thanks (after 2 messages)");

    const call = await send({ From: "+15559998888", To: "+15550001111", CallSid: "CA1", SpeechResult: "hello" });
    expect(await call.text()).toMatch(/<Say>Answer to hello \(after 4 messages\)<\/Say><Gather input="speech"/);
  });

  it("chat workspace: answers the URL verification challenge, and replies to a message through the web API", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/chatworkspace",
      form(
        {
          chatbot_id: id,
          team_id: "T1",
          signing_secret: WORKSPACE_SIGNING,
          bot_token: WORKSPACE_BOT_TOKEN,
          api_base_url: "https://slack-gov.com/api",
          enabled: "true",
        },
        bearer(org.owner.token),
      ),
    );
    const post = async (payload: unknown) => {
      const raw = JSON.stringify(payload);
      const ts = Math.floor(Date.now() / 1000);
      return app.request(`/chatbots/webhooks/chatworkspace/${id}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-chatworkspace-request-timestamp": String(ts),
          "x-chatworkspace-signature": await signWorkspace(WORKSPACE_SIGNING, ts, raw),
        },
        body: raw,
      });
    };
    const challenge = await post({ type: "url_verification", challenge: "abc123" });
    expect(await body(challenge)).toEqual({ challenge: "abc123" });

    const event = await post({
      type: "event_callback",
      team_id: "T1",
      event_id: "Ev1",
      event: { type: "app_mention", text: "<@U0BOT> what's new?", user: "U1", channel: "C1", ts: "1700000000.0001" },
    });
    expect(await body(event)).toEqual({ ok: true });
    await app.settle();
    expect(app.recorded.fetches).toHaveLength(1);
    const sent = app.recorded.fetches[0];
    expect(sent.url).toBe("https://slack-gov.com/api/chat.postMessage");
    expect(new Headers(sent.init?.headers).get("authorization")).toBe(`Bearer ${WORKSPACE_BOT_TOKEN}`);
    expect(JSON.parse(String(sent.init?.body))).toEqual({
      channel: "C1",
      text: "Answer to what's new? (after 0 messages)",
      thread_ts: "1700000000.0001",
    });

    // The bot's own messages are not answered (that would loop).
    const own = await post({
      type: "event_callback",
      team_id: "T1",
      event_id: "Ev2",
      event: { type: "message", text: "Answer", bot_id: "B1", channel: "C1", ts: "1700000000.0002" },
    });
    expect(await body(own)).toEqual({ ok: true, ignored: true });
    await app.settle();
    expect(app.recorded.fetches).toHaveLength(1);
  });
});

describe("chatbots: embedding and history budget", () => {
  it("answers CORS preflights for the public routes and exposes the visitor session header", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    const preflight = await app.request(`/chatbots/deployed/${id}/run`, {
      method: "OPTIONS",
      headers: {
        origin: "https://shop.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-visitor-session",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://shop.example");
    expect(preflight.headers.get("access-control-allow-headers")).toContain("x-visitor-session");
    const ran = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ text: "hi" }, { origin: "https://shop.example" }),
    );
    expect(ran.headers.get("access-control-expose-headers")).toContain("x-visitor-session");
  });

  it("cuts history to the token budget, newest turns kept, never splitting a message", () => {
    const turns = Array.from({ length: 10 }, (_, i) => ({
      role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
      content: `turn ${i} ${"word ".repeat(20)}`,
    }));
    expect(countTokens("Hello, world!")).toBe(4);
    const kept = cutHistory(turns, 3 * (countTokens(turns[0].content) + 4));
    expect(kept.map((t) => t.content.split(" ")[1])).toEqual(["7", "8", "9"]);
    expect(cutHistory(turns, 5)).toEqual([]);
    expect(cutHistory(turns, 1_000_000)).toHaveLength(10);
    expect(conversationNameFrom("  First line\nsecond")).toBe("First line");
    expect(conversationNameFrom("x".repeat(100)).length).toBeLessThanOrEqual(61);
  });
});
