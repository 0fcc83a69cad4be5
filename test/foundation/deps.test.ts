import { createExecutionContext, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app";
import { productionDeps } from "../../src/deps";
import { bearer, json, seedOrg } from "../helpers";
import { connect } from "../providers/connect";
import { FakeNetwork, openAiStream } from "../providers/fake-providers";

describe("deps: implementations are chosen once, at the edge", () => {
  it("createApp(overrides) reaches the services behind the routes: a chatbot answers through the chosen network", async () => {
    const org = await seedOrg();
    await connect(org, { name: "openai", kind: "openai", secret: "sk-deps-edge-4242" });
    // Chatbots stream their answers: the fake answers in OpenAI's streaming format.
    const net = new FakeNetwork().on("https://api.openai.com/v1/chat/completions", () =>
      openAiStream(["Answered through ", "the chosen network."]),
    );
    const app = createApp({ providers: { fetch: net.fetch } });
    const request = (path: string, init: RequestInit) =>
      app.fetch(new Request(`http://loom.test${path}`, init), env, createExecutionContext());

    const created = await request(
      "/v1/chatbot",
      json({ name: `deps-${crypto.randomUUID()}`, model: "openai/gpt-4o-mini" }, bearer(org.owner.apiKey)),
    );
    const { id } = (await created.json()) as { id: string };
    const answered = await request(`/v1/chatbot/${id}/run`, json({ text: "Who answers?" }, bearer(org.owner.apiKey)));
    expect(await answered.json()).toMatchObject({
      status: "success",
      output_message: "Answered through the chosen network.",
    });
    const sent = net.to("api.openai.com");
    expect(sent).toHaveLength(1);
    expect(sent[0].headers.authorization).toBe("Bearer sk-deps-edge-4242");
    expect(JSON.stringify(sent[0].json?.messages)).toContain("Who answers?");
  });

  it("the production implementations cannot be swapped in place", () => {
    expect(Object.isFrozen(productionDeps)).toBe(true);
    expect(Object.isFrozen(productionDeps.providers)).toBe(true);
    expect(() => {
      (productionDeps as { providers: unknown }).providers = {};
    }).toThrow(TypeError);
  });
});
