import { describe, expect, it } from "vitest";
import { env } from "cloudflare:test";
import { bearer, form, seedOrg } from "../helpers";
import type { AnswerEvent } from "../../src/features/chatbots/chatbot-services";
import { body, chatbotApp, createChatbot, run, sseReader, untilStored, type ChatbotApp } from "./harness";

type Org = Awaited<ReturnType<typeof seedOrg>>;

/** A chatbot whose answer to "slow" streams one piece, then waits for the test to let it go on. */
function gatedApp() {
  let entered = (): void => undefined;
  const inAnswer = new Promise<void>((resolve) => (entered = resolve));
  let release = (): void => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const app = chatbotApp({
    async *answer(input): AsyncIterable<AnswerEvent> {
      yield { type: "text", text: "partial" };
      if (input.question === "slow") {
        entered();
        await gate;
      }
      yield { type: "text", text: " more" };
      yield { type: "done", text: "partial more", answeredBy: "test", followUpQuestions: [] };
    },
  });
  return { app, inAnswer, release };
}

const deletions: {
  what: string;
  remove: (app: ChatbotApp, org: Org, chatbotId: string, conversationId: string) => Response | Promise<Response>;
}[] = [
  {
    what: "the conversation",
    remove: (app, org, _chatbotId, conversationId) =>
      app.request(
        "/chatbots/conversations/delete",
        form({ conversation_id: conversationId }, bearer(org.owner.token), "DELETE"),
      ),
  },
  {
    what: "the chatbot",
    remove: (app, org, chatbotId) =>
      app.request(`/v1/chatbot/${chatbotId}`, { method: "DELETE", headers: bearer(org.owner.apiKey) }),
  },
];

describe("chatbots: deleting a conversation while it is answered", () => {
  for (const { what, remove } of deletions) {
    it(`deleting ${what} ends the streaming answer and the message queued behind it, each with a clear result`, async () => {
      const { app, inAnswer, release } = gatedApp();
      const org = await seedOrg();
      const chatbotId = await createChatbot(app, org.owner.apiKey);
      const first = await run(app, org.owner.apiKey, chatbotId, { text: "start" });
      const conversationId = String(first.body.conversation_id);

      const streamed = await app.request(`/v1/chatbot/${chatbotId}/run`, {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(org.owner.apiKey) },
        body: JSON.stringify({ text: "slow", conversation_id: conversationId, stream: true }),
      });
      const events = sseReader(streamed);
      expect(await events.next()).toEqual({ type: "stream", output_value: "partial" });
      await inAnswer;
      const queued = run(app, org.owner.apiKey, chatbotId, { text: "queued", conversation_id: conversationId });
      await untilStored(conversationId, (messages) => messages.some((m) => m.content === "queued"));

      expect(await body(await remove(app, org, chatbotId, conversationId))).toEqual({ status: "success" });
      // The queued message is released by the deletion itself, before the answer ahead of it ends.
      const waiting = await queued;
      expect(waiting.status).toBe(409);
      expect(waiting.body).toEqual({
        status: "failed",
        error: "the conversation was deleted before this message was answered",
      });

      release();
      expect(await events.next()).toEqual({ type: "stream", output_value: " more" });
      expect(await events.next()).toMatchObject({
        status: "failed",
        conversation_id: conversationId,
        message_id: null,
        error: "the conversation was deleted while this message was being answered",
      });
      expect(await events.next()).toBeNull();

      // Nothing of the conversation is left, and its object answers calls with empty tables.
      const stub = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(conversationId));
      expect(await stub.read()).toEqual({ messages: [], attachments: [] });
      const read = await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(org.owner.token) });
      expect(read.status).toBe(404);
    });
  }
});
