import { env } from "cloudflare:test";
import type { Env } from "../../src/env";
import { createApp } from "../../src/app";
import type {
  AnswerEvent,
  AnswerInput,
  ChatbotServices,
  MessageSource,
} from "../../src/features/chatbots/chatbot-services";
import type { StoredMessage } from "../../src/durable-objects/conversation-object";
import { bearer, json } from "../helpers";

/** What the fake services saw, so tests can check what reached the model. */
export interface Recorded {
  answers: AnswerInput[];
  fetches: { url: string; init: RequestInit | undefined }[];
  transcribed: { mimeType: string; size: number }[];
}

export const KB_SOURCE: MessageSource = {
  knowledgeBaseId: "0".repeat(24),
  documentId: "1".repeat(24),
  chunkId: "c1",
  name: "handbook.md",
  score: 0.9,
  text: "Loom stores messages in order.",
};

/**
 * In-test ChatbotServices: answers "Answer to <question> (after <n> messages)" word by word, so
 * tests see both the streamed pieces and which history each turn was given.
 */
export function fakeServices(recorded: Recorded, overrides: Partial<ChatbotServices> = {}): ChatbotServices {
  return {
    async *answer(input): AsyncIterable<AnswerEvent> {
      recorded.answers.push(input);
      const words = `Answer to ${input.question} (after ${input.history.length} messages)`.split(" ");
      let text = "";
      for (const [i, word] of words.entries()) {
        const piece = i === 0 ? word : ` ${word}`;
        text += piece;
        yield { type: "text", text: piece };
      }
      yield {
        type: "done",
        text,
        answeredBy: input.model ?? "loom/extractive",
        followUpQuestions: ["What else?", "Why?", "How?", "When?", "Who?", "Where?"],
      };
    },
    async queryKnowledgeBases(query) {
      return query.knowledgeBaseIds.length > 0 ? [KB_SOURCE] : [];
    },
    async runPipeline(input) {
      // The message arrives in whichever input the chatbot names (`query` by default, or the pipeline's only input).
      return { answer: `pipeline says ${String(input.inputs.query ?? Object.values(input.inputs)[0])}` };
    },
    async transcribe(input) {
      recorded.transcribed.push({ mimeType: input.mimeType, size: input.audio.length });
      return new TextDecoder().decode(input.audio);
    },
    async canTranscribe() {
      return true;
    },
    fetch: async (url, init) => {
      recorded.fetches.push({ url: String(url), init });
      return Response.json({ ok: true });
    },
    ...overrides,
  };
}

/** The whole app, built with in-test chatbot services, over the real D1, R2 and Durable Objects. */
export function chatbotApp(overrides: Partial<ChatbotServices> = {}, envOverrides: Partial<Env> = {}) {
  const recorded: Recorded = { answers: [], fetches: [], transcribed: [] };
  const app = createApp({ chatbotServices: () => fakeServices(recorded, overrides) });
  const pending: Promise<unknown>[] = [];
  const ctx = {
    waitUntil: (p: Promise<unknown>) => void pending.push(p),
    passThroughOnException: () => undefined,
    props: {},
  } as unknown as ExecutionContext;
  return {
    recorded,
    request: (path: string, init: RequestInit = {}) =>
      app.request(`http://loom.test${path}`, init, { ...env, ...envOverrides }, ctx),
    /** Waits for background work (webhook replies) to finish. */
    settle: async () => {
      while (pending.length > 0) await Promise.all(pending.splice(0));
    },
  };
}

export type ChatbotApp = ReturnType<typeof chatbotApp>;

export async function createChatbot(
  app: ChatbotApp,
  apiKey: string,
  fields: Record<string, unknown> = {},
): Promise<string> {
  const res = await app.request(
    "/v1/chatbot",
    json(
      {
        name: `bot-${crypto.randomUUID()}`,
        description: "a test bot",
        system_prompt: "Be brief.",
        follow_up_questions: 2,
        ...fields,
      },
      bearer(apiKey),
    ),
  );
  const body = (await res.json()) as { id?: string };
  if (res.status !== 200 || !body.id) throw new Error(`create chatbot failed: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

export async function body(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

/** Parses a server-sent events body into its JSON data events. */
export function sseEvents(text: string): Record<string, unknown>[] {
  return text
    .split("\n\n")
    .map((block) => block.trim())
    .filter((block) => block.startsWith("data: "))
    .map((block) => JSON.parse(block.slice(6)) as Record<string, unknown>);
}

export async function run(app: ChatbotApp, apiKey: string, chatbotId: string, fields: Record<string, unknown>) {
  const res = await app.request(`/v1/chatbot/${chatbotId}/run`, json(fields, bearer(apiKey)));
  return { status: res.status, body: await body(res) };
}

export async function deployPublic(
  app: ChatbotApp,
  token: string,
  chatbotId: string,
  extra: Record<string, string> = {},
): Promise<void> {
  const res = await app.request("/chatbots/deploy", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...bearer(token) },
    body: new URLSearchParams({ chatbot_id: chatbotId, ...extra }).toString(),
  });
  if (res.status !== 200) throw new Error(`deploy failed: ${res.status} ${await res.text()}`);
}

/**
 * Waits until the conversation's own object holds what `ready` asks for (a message stored, so its
 * turn has its place in the queue). Each round is one call to the object: the object's queue
 * orders the requests, not a timer.
 */
export async function untilStored(
  conversationId: string,
  ready: (messages: StoredMessage[]) => boolean,
): Promise<StoredMessage[]> {
  const stub = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(conversationId));
  for (let round = 0; round < 10_000; round++) {
    const { messages } = await stub.read();
    if (ready(messages)) return messages;
  }
  throw new Error(`conversation ${conversationId} never reached the awaited state`);
}

/** Reads server-sent events one at a time from a streamed response. */
export function sseReader(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  return {
    /** The next data event, or null when the stream ended. */
    async next(): Promise<Record<string, unknown> | null> {
      for (;;) {
        const end = buffered.indexOf("\n\n");
        if (end >= 0) {
          const block = buffered.slice(0, end).trim();
          buffered = buffered.slice(end + 2);
          if (block.startsWith("data: ")) return JSON.parse(block.slice(6)) as Record<string, unknown>;
          continue;
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffered += value;
      }
    },
  };
}
