import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { ConversationObject, type BeginResult } from "../../src/durable-objects/conversation-object";

const done = { sources: [], followUpQuestions: [], answeredBy: "test", error: null };

describe("ConversationObject", () => {
  it("keeps an answer completed after the object restarted mid-turn, and lets the conversation go on", async () => {
    const stub = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(`restart-${crypto.randomUUID()}`));
    const first: BeginResult = await stub.begin({ text: "question", historyBudget: 1000, turnTimeoutMs: 60_000 });
    expect(first.ok).toBe(true);
    await runInDurableObject(stub, async (_instance: ConversationObject, state) => {
      // A second instance over the same storage is what the object looks like after an eviction.
      const restarted = new ConversationObject(state, env);
      // The constructor's start-up work runs under blockConcurrencyWhile; a later block runs after it.
      await state.blockConcurrencyWhile(async () => undefined);
      expect((await restarted.read()).messages[0]).toMatchObject({
        content: "question",
        status: "failed",
        error: "interrupted",
      });
      expect(await restarted.proceed(first.userMessageId)).toBe(true);
      const stored = await restarted.complete(first.userMessageId, {
        content: "late answer",
        status: "complete",
        ...done,
      });
      expect(stored.ok).toBe(true);
      // Completing twice stores nothing more.
      expect(
        (await restarted.complete(first.userMessageId, { content: "again", status: "complete", ...done })).ok,
      ).toBe(false);
      const { messages } = await restarted.read();
      expect(messages.map((m) => `${m.role}:${m.content}:${m.status}`)).toEqual([
        "user:question:complete",
        "assistant:late answer:complete",
      ]);
      const next = await restarted.begin({ text: "follow-up", historyBudget: 1000, turnTimeoutMs: 60_000 });
      expect(next.ok && next.history).toEqual([
        { role: "user", content: "question" },
        { role: "assistant", content: "late answer" },
      ]);
    });
  });

  it("closes a turn that takes too long, so the next message is answered", async () => {
    const stub = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(`timeout-${crypto.randomUUID()}`));
    const slow: BeginResult = await stub.begin({ text: "slow", historyBudget: 1000, turnTimeoutMs: 50 });
    const next: BeginResult = await stub.begin({ text: "next", historyBudget: 1000, turnTimeoutMs: 60_000 });
    expect(next.ok).toBe(true);
    expect(await stub.proceed(slow.userMessageId)).toBe(false);
    expect((await stub.complete(slow.userMessageId, { content: "too late", status: "complete", ...done })).ok).toBe(
      false,
    );
    const { messages } = await stub.read();
    expect(messages.map((m) => `${m.role}:${m.status}:${m.error ?? ""}`)).toEqual([
      "user:failed:",
      "assistant:failed:the answer took too long",
      "user:pending:",
    ]);
  });
});
