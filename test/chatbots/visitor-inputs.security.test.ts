// The owner decides what a visitor may send besides text: documents (`allow_uploads`) and recorded
// audio (`speech_to_text`). Switched off, the public profile says so (the widget hides the button)
// and the visitor routes refuse the input itself, so a hand-made request cannot get around it.
import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { body, chatbotApp, createChatbot, deployPublic } from "./harness";

const textFile = {
  type: "file",
  raw_bytes: btoa("Opening hours: 9 to 5."),
  metadata: { name: "hours.txt", mime_type: "text/plain", size: 22 },
};

describe("visitor inputs: uploads and audio follow the deployment settings", () => {
  it("uploads: on by default; allow_uploads false hides them in the profile and refuses every upload form with 403", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    expect((await body(await app.request(`/chatbots/deployed/${id}`))).chatbot).toMatchObject({ allowUploads: true });
    const first = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" })));
    const visitor = String(first.visitor_session);
    const conversation = String(first.conversation_id);
    expect(
      (
        await app.request(
          "/chatbots/upload",
          json({ chatbot_id: id, visitor_session: visitor, conversation_id: conversation, file: textFile }),
        )
      ).status,
    ).toBe(200);

    const off = await app.request(
      "/chatbots/update/deployment",
      form({ chatbot_id: id, allow_uploads: "false" }, bearer(org.owner.token)),
    );
    expect(off.status).toBe(200);
    expect((await body(await app.request(`/chatbots/deployed/${id}`))).chatbot).toMatchObject({ allowUploads: false });
    const attempts = [
      json({ chatbot_id: id, visitor_session: visitor, conversation_id: conversation, file: textFile }),
      json({ chatbot_id: id, visitor_session: visitor, files: [textFile] }),
      { method: "POST", headers: { "x-visitor-session": visitor }, body: multipart(id, conversation) },
    ];
    for (const init of attempts) {
      const res = await app.request("/chatbots/upload", init);
      expect([res.status, await body(res)]).toEqual([403, { detail: "this chatbot does not accept file uploads" }]);
    }
    // The owner's own upload route is not a visitor input: it still works.
    expect(
      (await app.request(`/v1/chatbot/${id}/upload`, json({ file: textFile }, bearer(org.owner.apiKey)))).status,
    ).toBe(200);
  });

  it("audio: speech_to_text false hides the microphone and refuses visitor audio (JSON and multipart) with 403 before transcribing", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    expect((await body(await app.request(`/chatbots/deployed/${id}`))).chatbot).toMatchObject({ speechToText: true });
    const heard = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ audio: btoa("what are the hours"), audio_mime_type: "audio/webm" }),
    );
    expect(heard.status).toBe(200);
    expect(app.recorded.transcribed).toHaveLength(1);

    await deployPublic(app, org.owner.token, id, { speech_to_text: "false" });
    expect((await body(await app.request(`/chatbots/deployed/${id}`))).chatbot).toMatchObject({ speechToText: false });
    const audioForm = new FormData();
    audioForm.set(
      "audio",
      new File([new TextEncoder().encode("what are the hours")], "voice.webm", { type: "audio/webm" }),
    );
    for (const init of [
      json({ audio: btoa("what are the hours"), audio_mime_type: "audio/webm" }),
      json({ audio: btoa("hours"), stream: true }),
      { method: "POST", body: audioForm },
    ]) {
      const res = await app.request(`/chatbots/deployed/${id}/run`, init);
      expect([res.status, await body(res)]).toEqual([
        403,
        { detail: "this chatbot does not take audio from visitors; send text" },
      ]);
    }
    expect(app.recorded.transcribed).toHaveLength(1);
    // Text still works, and the owner's /v1 run still takes audio.
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hours?" }))).status).toBe(200);
    expect(
      (await app.request(`/v1/chatbot/${id}/run`, json({ audio: btoa("hours") }, bearer(org.owner.apiKey)))).status,
    ).toBe(200);
  });

  it("the real Worker shows the microphone only when the organization has a speech-to-text connection", async () => {
    const org = await seedOrg();
    const created = await call(
      "/v1/chatbot",
      json({ name: "talker", description: "d", system_prompt: "Be brief." }, bearer(org.owner.apiKey)),
    );
    const id = String(((await created.json()) as { id: string }).id);
    expect((await call("/chatbots/deploy", form({ chatbot_id: id }, bearer(org.owner.token)))).status).toBe(200);
    const profile = async () =>
      ((await (await call(`/chatbots/deployed/${id}`)).json()) as { chatbot: { speechToText: boolean } }).chatbot
        .speechToText;
    expect(await profile()).toBe(false);
    // OpenAI's own endpoint has a default transcription model (whisper-1); nothing is called here.
    expect(
      (
        await call(
          "/admin/connections/create",
          form({ name: "speech", kind: "openai", secret: "sk-test-speech" }, bearer(org.owner.token)),
        )
      ).status,
    ).toBe(200);
    expect(await profile()).toBe(true);
    expect(
      (
        await call(
          "/chatbots/update/deployment",
          form({ chatbot_id: id, speech_to_text: "false" }, bearer(org.owner.token)),
        )
      ).status,
    ).toBe(200);
    expect(await profile()).toBe(false);
  });
});

function multipart(chatbotId: string, conversationId: string): FormData {
  const data = new FormData();
  data.set("chatbot_id", chatbotId);
  data.set("conversation_id", conversationId);
  data.set("file", new File([new TextEncoder().encode("Opening hours: 9 to 5.")], "hours.txt", { type: "text/plain" }));
  return data;
}
