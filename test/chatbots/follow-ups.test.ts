import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { chatModelFor } from "../../src/providers/registry";
import { followUpQuestions } from "../../src/features/chatbots/chatbot-services";
import { connect } from "../providers/connect";
import { FakeNetwork, openAiCompletion } from "../providers/fake-providers";

/** The second model call a chatbot makes when it is set to suggest follow-up questions. */
describe("chatbots: follow-up questions from a generating model", () => {
  async function modelAnswering(text: string) {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-openai-follow-ups" });
    const net = new FakeNetwork().on("https://api.openai.com/v1/chat/completions", () => openAiCompletion(text));
    return { net, model: await chatModelFor(env, org, "openai/gpt-4o-mini", { fetch: net.fetch }) };
  }

  it("asks for exactly the configured number, about the question and its answer, and keeps clean questions", async () => {
    const { net, model } = await modelAnswering(
      "1. How is the slipstream measured?\n- What about drag?\n\n3) Does the wing stall earlier?\n",
    );
    const questions = await followUpQuestions(
      model,
      "How does lift change in a slipstream?",
      "Lift increases with the slipstream [1].",
      2,
      new AbortController().signal,
    );
    expect(questions).toEqual(["How is the slipstream measured?", "What about drag?"]);
    expect(net.received).toHaveLength(1);
    const messages = net.received[0]?.json?.messages as { role: string; content: string }[];
    expect(messages[0]?.content).toContain("Give exactly 2.");
    expect(messages[1]?.content).toBe(
      "Question: How does lift change in a slipstream?\n\nAnswer: Lift increases with the slipstream [1].",
    );
  });

  it("drops blank and overlong lines, and never returns more than asked", async () => {
    const { model } = await modelAnswering(`* First?\n\n${"x".repeat(400)}\n• Second?\n2. Third?\n4. Fourth?`);
    expect(await followUpQuestions(model, "q", "a", 3, new AbortController().signal)).toEqual([
      "First?",
      "Second?",
      "Third?",
    ]);
  });

  it("makes no call when none are wanted, when the run was stopped, or for the extractive answerer", async () => {
    const { net, model } = await modelAnswering("Unused?");
    expect(await followUpQuestions(model, "q", "a", 0, new AbortController().signal)).toEqual([]);
    const stopped = new AbortController();
    stopped.abort();
    expect(await followUpQuestions(model, "q", "a", 3, stopped.signal)).toEqual([]);
    const org = await seedOrg();
    const extractive = await chatModelFor(env, org, "loom/extractive", { allowExtractive: true, fetch: net.fetch });
    expect(await followUpQuestions(extractive, "q", "a", 3, new AbortController().signal)).toEqual([]);
    expect(net.received).toHaveLength(0);
  });
});
