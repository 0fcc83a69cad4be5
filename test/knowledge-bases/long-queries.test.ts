import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { createKb, indexText, query } from "./kb-fixtures";
import { embeddingText } from "../../src/features/knowledge-bases/index/keyword-query";
import {
  expandWithFeedback,
  FEEDBACK,
  feedbackLambda,
} from "../../src/features/knowledge-bases/index/keyword-feedback";

/** Issue 14's third pass on quality: long natural-language queries (BENCHMARKS.md). */
describe("keyword feedback (RM3) takes what the feedback chunks share", () => {
  it("adds a stem two feedback chunks hold, never one only a single chunk holds, unless the query says it", () => {
    const query = new Map([["flutter", 1]]);
    const docs = [
      // The first pass's top chunk: its own subject ("chemical") fills it, and it holds the query term.
      {
        stems: new Map([
          ["flutter", 1],
          ["chemical", 9],
          ["panel", 2],
        ]),
        score: 10,
      },
      {
        stems: new Map([
          ["flutter", 1],
          ["panel", 1],
          ["wing", 1],
        ]),
        score: 2,
      },
    ];
    const mixed = expandWithFeedback(query, docs, () => 1);
    expect(mixed.has("chemical")).toBe(false);
    expect(mixed.has("wing")).toBe(false);
    expect(mixed.get("panel")).toBeGreaterThan(0);
    // A query stem counts as feedback even when one chunk holds it; the weights still sum to 1.
    expect(mixed.get("flutter")).toBeGreaterThan(FEEDBACK.originalWeight);
    expect([...mixed.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
  });

  it("learns from a lone feedback chunk all the same (nothing to share with)", () => {
    const mixed = expandWithFeedback(
      new Map([["flutter", 1]]),
      [{ stems: new Map([["panel", 3]]), score: 1 }],
      () => 1,
    );
    expect(mixed.get("panel")).toBeCloseTo(1 - FEEDBACK.originalWeight, 9);
  });
});

describe("RM3's lambda grows with the query's length", () => {
  it("keeps the fixed share for a short query and the query's per-term weight for a long one", () => {
    expect(feedbackLambda(6, FEEDBACK.terms)).toBe(FEEDBACK.originalWeight);
    expect(feedbackLambda(FEEDBACK.terms, FEEDBACK.terms)).toBe(0.5);
    expect(feedbackLambda(40, 20)).toBeCloseTo(40 / 60, 12);
    expect(feedbackLambda(0, 0)).toBe(1);
  });

  it("never lets a long request's own terms weigh less on average than a feedback term", () => {
    const query = new Map(Array.from({ length: 40 }, (_, i): [string, number] => [`q${i}`, 1]));
    // Two feedback chunks sharing 20 new stems (and none of the query's).
    const shared = new Map(Array.from({ length: 20 }, (_, i): [string, number] => [`f${i}`, 1]));
    const mixed = expandWithFeedback(
      query,
      [
        { stems: shared, score: 2 },
        { stems: new Map(shared), score: 1 },
      ],
      () => 1,
    );
    const mean = (prefix: string): number => {
      const ws = [...mixed].filter(([s]) => s.startsWith(prefix)).map(([, w]) => w);
      return ws.reduce((a, w) => a + w, 0) / ws.length;
    };
    expect(mean("f")).toBeGreaterThan(0);
    expect(mean("q")).toBeGreaterThanOrEqual(mean("f") - 1e-12);
    expect([...mixed.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
  });
});

describe("a bag-of-words embedder reads only the query's search terms", () => {
  it("drops function and request words, keeping the terms' order and case", () => {
    expect(embeddingText("Has anyone described papers on Panel flutter in the wings? Please, e.g. data.")).toBe(
      "Panel flutter wings data",
    );
    expect(embeddingText("I'd like the user's view")).toBe("like user view");
    // Nothing but function words: the text itself.
    expect(embeddingText("what is it")).toBe("what is it");
  });

  it("gives a wordy request the vector of its terms alone, through the Worker", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kb = await createKb(key);
    await indexText(
      key,
      kb,
      "flutter.txt",
      "Panel flutter\n\nFlutter of thin panels was measured at supersonic speed.",
    );
    await indexText(key, kb, "wings.txt", "Wing loads\n\nLoads on swept wings in transonic flow.");
    const ask = async (text: string) => {
      const found = await query(key, kb, {
        queries: [text],
        config: { retrieval_config: { search_mode: "vector" }, retrieval_unit: "documents" },
      });
      expect(found.status).toBe(200);
      return found.items.map((item) => [String(item.text).slice(0, 12), item.score]);
    };
    const wordy = await ask("What papers are there, if any, on Panel flutter? I am interested in all of them.");
    expect(wordy.length).toBe(2);
    expect(wordy).toEqual(await ask("Panel flutter"));
  });
});
