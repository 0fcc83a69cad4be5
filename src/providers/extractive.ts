import { contentTerms, sentences } from "./text";
import type { ChatMessage, ChatModel, ChatRequest, ChatResult, ChatStreamEvent } from "./types";

export const EXTRACTIVE_MODEL = "loom/extractive";
export const NO_ANSWER = "The retrieved passages do not contain an answer to this question.";
export const NO_SOURCES =
  "The built-in extractive answerer (loom/extractive) only quotes retrieved passages and none were given. Add a chat connection (openai, anthropic or workers_ai) for a generative answer.";

/** Sources travel in the system prompt between these tags, one `[n] text` line each. */
export const SOURCES_OPEN = "<sources>";
export const SOURCES_CLOSE = "</sources>";

export interface ExtractiveOptions {
  /** Most sentences quoted in one answer. */
  maxSentences?: number;
}

export interface Extract {
  text: string;
  /** The quoted sentences in answer order, each with its 1-based source number. */
  quotes: { sentence: string; source: number }[];
}

/**
 * Picks the sentences of the passages that best cover the question's terms: each sentence scores the
 * inverse sentence frequency of the question terms it holds, damped by its length and its passage's
 * rank; picks are greedy, and terms already covered count less, so the answer does not repeat itself.
 */
export function extractAnswer(question: string, passages: string[], options: ExtractiveOptions = {}): Extract {
  const maxSentences = options.maxSentences ?? 3;
  const queryTerms = new Set(contentTerms(question));
  const candidates: { sentence: string; source: number; terms: Set<string>; length: number }[] = [];
  passages.forEach((passage, i) => {
    for (const sentence of sentences(passage)) {
      const terms = contentTerms(sentence);
      if (terms.length === 0 || sentence.length > 1200) continue;
      candidates.push({ sentence, source: i + 1, terms: new Set(terms), length: terms.length });
    }
  });
  // A sentence of one or two content words is a heading or a label ("Refunds policy." once a
  // Markdown heading has become a sentence), not an answer: quoted only when nothing longer exists.
  const substantive = candidates.filter((c) => c.length >= 3);
  if (substantive.length > 0) candidates.splice(0, candidates.length, ...substantive);
  if (queryTerms.size === 0 || candidates.length === 0) return { text: NO_ANSWER, quotes: [] };
  const idf = new Map<string, number>();
  for (const term of queryTerms) {
    const df = candidates.filter((c) => c.terms.has(term)).length;
    idf.set(term, Math.log(1 + candidates.length / (1 + df)));
  }
  const covered = new Map<string, number>();
  const chosen: typeof candidates = [];
  let best = 0;
  while (chosen.length < maxSentences) {
    let top: (typeof candidates)[number] | undefined;
    let topScore = 0;
    for (const candidate of candidates) {
      if (chosen.includes(candidate)) continue;
      let score = 0;
      for (const term of queryTerms) {
        if (candidate.terms.has(term)) score += (idf.get(term) ?? 0) / (1 + (covered.get(term) ?? 0));
      }
      score = (score / (1 + Math.log(1 + candidate.length / 12))) * (1 / (1 + 0.05 * (candidate.source - 1)));
      if (score > topScore) {
        topScore = score;
        top = candidate;
      }
    }
    // Stop when nothing matches, or the next sentence is far weaker than the first.
    if (!top || topScore <= 0 || topScore < best * 0.35) break;
    if (chosen.length === 0) best = topScore;
    chosen.push(top);
    for (const term of top.terms) if (queryTerms.has(term)) covered.set(term, (covered.get(term) ?? 0) + 1);
  }
  if (chosen.length === 0) return { text: NO_ANSWER, quotes: [] };
  const quotes = chosen.map((c) => ({ sentence: c.sentence, source: c.source }));
  return { text: quotes.map(cite).join(" "), quotes };
}

/** "The wing stalls." with source 2 becomes "The wing stalls [2]." */
function cite(quote: { sentence: string; source: number }): string {
  const match = /^(.*?)([.!?]+)?$/s.exec(quote.sentence);
  return `${match?.[1] ?? quote.sentence} [${quote.source}]${match?.[2] ?? "."}`;
}

/** Reads the numbered sources out of a prompt built by `buildGroundedPrompt`. */
export function sourcesInPrompt(messages: ChatMessage[]): string[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const content = messages[i]?.content ?? "";
    const open = content.indexOf(SOURCES_OPEN);
    const close = content.indexOf(SOURCES_CLOSE, open);
    if (open < 0 || close < 0) continue;
    const block = content.slice(open + SOURCES_OPEN.length, close);
    const out: string[] = [];
    for (const line of block.split("\n")) {
      // `[n] (title) text`: the title is a label, not something to quote.
      const match = /^\[(\d+)\]\s?(?:\([^()\n]{0,200}\)\s)?(.*)$/.exec(line);
      if (match) out[Number(match[1]) - 1] = match[2] ?? "";
    }
    return Array.from(out, (text) => text ?? "");
  }
  return [];
}

/** The question: the last user turn, with the one before it when the last is a short follow-up. */
function questionOf(messages: ChatMessage[]): string {
  const users = messages.filter((m) => m.role === "user").map((m) => m.content);
  const last = users[users.length - 1] ?? "";
  const previous = users[users.length - 2];
  return contentTerms(last).length < 3 && previous ? `${last} ${previous}` : last;
}

/** [everything before the last sentence, the last sentence]. */
function splitLastSentence(line: string): [string, string] {
  const all = sentences(line);
  if (all.length < 2) return ["", line];
  const lastSentence = all[all.length - 1];
  const at = line.lastIndexOf(lastSentence);
  return at > 0 ? [line.slice(0, at), line.slice(at)] : ["", line];
}

/**
 * The question and the context of a prompt that has no `<sources>` block. The question is the last
 * line of the last user turn that ends in "?" (else its last line); every other non-empty line or
 * paragraph of every turn is a passage, in prompt order. A prompt that is only a question has none.
 */
export function untaggedContext(messages: ChatMessage[]): { question: string; passages: string[] } {
  const turns = messages.filter((m) => m.role === "system" || m.role === "user").map((m) => m.content ?? "");
  const last = turns.length - 1;
  const lines = (turns[last] ?? "")
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  let at = -1;
  for (let i = lines.length - 1; i >= 0 && at < 0; i--) if (lines[i].endsWith("?")) at = i;
  if (at < 0) at = lines.length - 1;
  // On that line the question is what follows "Question:", else its last sentence; the rest is context.
  const line = lines[at] ?? "";
  const marker = line.toLowerCase().lastIndexOf("question:");
  const parts =
    marker >= 0 ? [line.slice(0, marker), line.slice(marker + "question:".length)] : splitLastSentence(line);
  const question = parts[1].trim();
  const context = [...turns.slice(0, last), [...lines.slice(0, at), parts[0], ...lines.slice(at + 1)].join("\n")];
  // Labels such as "Context:" carry no content; a line that is only a label is dropped.
  const passages = context
    .flatMap((text) => text.split(/\n\s*\n|\n/))
    .map((text) => text.replace(/^(context|sources?|passages?|documents?)\s*:\s*/i, "").trim())
    .filter((text) => contentTerms(text).length > 0);
  return { question, passages };
}

/**
 * An offline ChatModel that answers only from the sources in its prompt, by quoting them. It is
 * honest about what it is: its model name is `loom/extractive`, it counts no tokens, and with no
 * sources it says it cannot converse.
 */
export class ExtractiveAnswerer implements ChatModel {
  readonly model = EXTRACTIVE_MODEL;
  readonly extractive = true;

  constructor(private readonly options: ExtractiveOptions = {}) {}

  answer(request: ChatRequest): Extract {
    const sources = sourcesInPrompt(request.messages);
    if (sources.length > 0) return extractAnswer(questionOf(request.messages), sources, this.options);
    // No tagged sources (a pipeline's llm node with the knowledge-base context pasted into its
    // prompt, say): answer from whatever context the prompt carries, around the question.
    const untagged = untaggedContext(request.messages);
    if (untagged.passages.length === 0) return { text: NO_SOURCES, quotes: [] };
    return extractAnswer(untagged.question, untagged.passages, this.options);
  }

  async complete(request: ChatRequest): Promise<ChatResult> {
    return {
      text: this.answer(request).text,
      toolCalls: [],
      usage: { input_tokens: 0, output_tokens: 0 },
      model: this.model,
    };
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const extract = this.answer(request);
    const pieces = extract.quotes.length ? extract.quotes.map(cite) : [extract.text];
    for (const [i, piece] of pieces.entries()) yield { type: "text", text: i === 0 ? piece : ` ${piece}` };
    yield {
      type: "done",
      result: { text: extract.text, toolCalls: [], usage: { input_tokens: 0, output_tokens: 0 }, model: this.model },
    };
  }
}

export function isExtractive(model: ChatModel): boolean {
  return model.model === EXTRACTIVE_MODEL;
}
