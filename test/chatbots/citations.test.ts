import { describe, expect, it } from "vitest";
import { bearer, call, json, seedOrg } from "../helpers";
import { withoutUnknownCitations } from "../../src/providers/grounded-answer";

describe("chatbot answers cite only sources that exist", () => {
  it("drops markers past the sources shown, keeps the rest", () => {
    expect(withoutUnknownCitations("Refunds take 5 days [4]. Loom is offline [1][2].", 3)).toBe(
      "Refunds take 5 days. Loom is offline [1][2].",
    );
    expect(withoutUnknownCitations("Nothing [0] here [12].", 3)).toBe("Nothing here.");
  });

  it("an offline answer quoting an attachment (numbered after the sources for the model) cites nothing past the sources", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const { id: kb } = (await (await call("/v1/knowledge-base", json({ name: "kb" }, bearer(key)))).json()) as {
      id: string;
    };
    const text = "Loom keeps each knowledge base in its own Durable Object.";
    await call(
      `/v1/knowledge-base/${kb}/index`,
      json(
        { file_data: { file: { raw_bytes: btoa(text), metadata: { name: "loom.txt", mime_type: "text/plain" } } } },
        bearer(key),
      ),
    );
    const { id } = (await (
      await call("/v1/chatbot", json({ name: "bot", description: "d", knowledge_base_ids: [kb] }, bearer(key)))
    ).json()) as { id: string };
    const upload = new FormData();
    upload.append(
      "file",
      new File(["Refunds take 5 days to reach the customer."], "policy.md", { type: "text/markdown" }),
    );
    const uploaded = (await (
      await call(`/v1/chatbot/${id}/upload`, { method: "POST", headers: bearer(key), body: upload })
    ).json()) as { conversation_id: string };
    const answered = (await (
      await call(
        `/v1/chatbot/${id}/run`,
        json(
          { text: "How long do refunds take to reach the customer?", conversation_id: uploaded.conversation_id },
          bearer(key),
        ),
      )
    ).json()) as { output_message: string; sources?: unknown[] };
    expect(answered.output_message).toContain("Refunds take 5 days");
    const shown = answered.sources?.length ?? 0;
    const cited = [...answered.output_message.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1]));
    expect(cited.filter((n) => n < 1 || n > shown)).toEqual([]);
  });
});
