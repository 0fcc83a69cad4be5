import { describe, expect, it } from "vitest";
import { ExtractiveAnswerer, NO_ANSWER, NO_SOURCES, extractAnswer } from "../../src/providers/extractive";
import { buildGroundedPrompt, groundedAnswer, streamGroundedAnswer } from "../../src/providers/grounded-answer";
import { expandQuery } from "../../src/providers/query-expansion";
import { sentences } from "../../src/providers/text";
import { readSse } from "../../src/providers/sse";
import { chunked, collect } from "./fake-providers";

const passages = [
  { text: "Heat conduction in composite slabs was solved analytically. The slabs had two layers.", documentId: "d2" },
  {
    text: "An experimental study of a wing in a propeller slipstream was made. Lift increased with the slipstream velocity ratio. The tunnel was small.",
    documentId: "d1",
  },
];

describe("offline: extractive answerer", () => {
  it("quotes the best-matching sentences with [n] citations and labels itself", async () => {
    const answer = await groundedAnswer({
      model: new ExtractiveAnswerer(),
      question: "How does lift change with slipstream velocity?",
      passages,
    });
    expect(answer.model).toBe("loom/extractive");
    expect(answer.extractive).toBe(true);
    expect(answer.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
    expect(answer.text.startsWith("Lift increased with the slipstream velocity ratio [2].")).toBe(true);
    expect(answer.text).not.toContain("tunnel was small");
    expect(answer.citations[0]).toMatchObject({ source: 2, documentId: "d1" });
  });

  it("streams the same answer sentence by sentence", async () => {
    const events = await collect(
      streamGroundedAnswer({ model: new ExtractiveAnswerer(), question: "heat conduction in slabs", passages }),
    );
    const text = events
      .filter((e) => e.type === "text")
      .map((e) => (e as { text: string }).text)
      .join("");
    const done = events.at(-1);
    expect(done?.type).toBe("done");
    expect(done?.type === "done" && done.answer.text).toBe(text);
    expect(text).toContain("Heat conduction in composite slabs was solved analytically [1].");
  });

  it("says plainly when nothing matches or no sources were given", async () => {
    expect(
      extractAnswer(
        "quantum chromodynamics",
        passages.map((p) => p.text),
      ).text,
    ).toBe(NO_ANSWER);
    const model = new ExtractiveAnswerer();
    expect((await model.complete({ messages: [{ role: "user", content: "hello there" }] })).text).toBe(NO_SOURCES);
  });

  it("uses the previous question for a short follow-up in a conversation", async () => {
    const messages = buildGroundedPrompt({
      question: "and why?",
      passages,
      history: [
        { role: "user", content: "what happens to lift in a slipstream" },
        { role: "assistant", content: "It increases." },
      ],
    });
    const result = await new ExtractiveAnswerer().complete({ messages });
    expect(result.text).toContain("[2]");
  });
});

describe("offline: pseudo-relevance feedback", () => {
  it("adds salient terms from the top documents and keeps the original query first", () => {
    const feedback = [
      {
        text: "boundary layer transition on a flat plate at supersonic speed; transition reynolds number measured",
        score: 9,
      },
      { text: "transition of the boundary layer and the reynolds number effect on heat transfer", score: 7 },
      { text: "unrelated paper about slabs", score: 0.5 },
    ];
    const expansion = expandQuery("boundary layer transition", feedback, { feedbackDocs: 2, terms: 3 });
    expect(expansion.query.startsWith("boundary layer transition ")).toBe(true);
    expect(expansion.added).toContain("reynolds");
    expect(expansion.added).not.toContain("slabs");
    expect(expansion.added).toHaveLength(3);
    expect(expansion.weighted[0]?.weight).toBeGreaterThan(0);
  });

  it("returns the query unchanged with no feedback", () => {
    expect(expandQuery("  wing flutter ", []).query).toBe("wing flutter");
  });
});

describe("offline: text and streams", () => {
  it("splits sentences without breaking after abbreviations", () => {
    expect(sentences("Flow was measured, e.g. at Mach 2. Then it stopped! Did it? yes .")).toEqual([
      "Flow was measured, e.g. at Mach 2.",
      "Then it stopped!",
      "Did it?",
      "yes .",
    ]);
  });

  it("parses server-sent events split anywhere, with comments, event names and CRLF", async () => {
    const body = chunked([
      ": comment\r\nevent: a\r\nda",
      'ta: {"x":1}\r\n\r\ndata: line1\ndata: line2\n\n',
      "data: tail",
    ]).body;
    const events = await collect(readSse(body as ReadableStream<Uint8Array>));
    expect(events).toEqual([
      { event: "a", data: '{"x":1}' },
      { event: "message", data: "line1\nline2" },
      { event: "message", data: "tail" },
    ]);
  });
});

describe("offline: extractive answers quote text, not labels", () => {
  it("never quotes a source's title or a Markdown heading as part of the answer", async () => {
    const passages = [
      {
        title: "aero.md",
        text: "# Engines\n\nJet engines compress air, burn fuel and expel exhaust to produce thrust.",
      },
    ];
    const answer = await groundedAnswer({
      model: new ExtractiveAnswerer(),
      question: "What do jet engines do?",
      passages,
    });
    expect(answer.text).toContain("Jet engines compress air, burn fuel and expel exhaust to produce thrust [1].");
    expect(answer.text).not.toContain("aero.md");
    expect(answer.text).not.toContain("#");
  });

  it("never quotes a heading as a sentence of its own", async () => {
    const passages = [
      {
        text: "# Engines\n\nJet engines compress air.\n\n## Refunds policy\n\nRefunds are paid within 14 days of the request.",
      },
    ];
    const answer = await groundedAnswer({
      model: new ExtractiveAnswerer(),
      question: "What is the refunds policy?",
      passages,
    });
    expect(answer.text).toBe("Refunds are paid within 14 days of the request [1].");
  });
});
