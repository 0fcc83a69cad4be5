// The public visitor routes, called from the chat page (same origin as Loom, so the visitor
// session token stays in this origin's storage and never reaches the embedding site).
import { VisitorStore } from "./storage";

export interface Source {
  name: string | null;
  text: string;
  score: number;
}

export interface Profile {
  _id: string;
  name: string;
  description: string | null;
  greeting: string | null;
  primaryColor: string | null;
  secondaryColor: string | null;
  avatarUrl: string | null;
  suggestedQuestions: string[];
  showSources: boolean;
  position: "left" | "right";
  access: { mode: "public" | "password" | "members" };
  /** Visitors may attach documents (the deployment's allow_uploads). */
  allowUploads: boolean;
  /** Visitors may send recorded audio: speech_to_text is on and the organization can transcribe. */
  speechToText: boolean;
}

export interface Message {
  _id: string;
  role: "user" | "assistant";
  content: string;
  status: string;
  sources?: Source[];
  followUpQuestions: string[];
  feedback: "like" | "dislike" | null;
  error?: string | null;
}

export interface RunResult {
  status: "success" | "failed";
  conversation_id: string;
  message_id: string | null;
  output_message: string;
  follow_up_questions: string[];
  sources?: Source[];
  error?: string;
  visitor_session?: string;
}

/** An HTTP failure turned into a sentence a visitor can read. */
export class VisitorError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function sentenceFor(status: number): string {
  if (status === 429) return "Too many messages right now. Please wait a minute and try again.";
  if (status === 404) return "This chatbot is not available right now.";
  if (status === 403) return "This chatbot cannot be used from this site.";
  if (status === 401) return "This chatbot needs a password.";
  if (status === 413) return "That file is too large.";
  if (status === 400 || status === 422) return "That message could not be sent. Please check it and try again.";
  return "Something went wrong. Please try again.";
}

interface StoredState {
  session?: string;
  conversationId?: string;
}

export class VisitorApi {
  private state: StoredState;
  private readonly store: VisitorStore;

  constructor(readonly chatbotId: string) {
    this.store = new VisitorStore(`loom-chat:${chatbotId}`, `/chat/${encodeURIComponent(chatbotId)}`);
    this.state = this.load();
  }

  private load(): StoredState {
    try {
      const raw = this.store.read();
      return raw ? (JSON.parse(raw) as StoredState) : {};
    } catch {
      return {};
    }
  }

  private save(): void {
    this.store.write(JSON.stringify(this.state));
  }

  get conversationId(): string | undefined {
    return this.state.conversationId;
  }

  get hasSession(): boolean {
    return Boolean(this.state.session);
  }

  newConversation(): void {
    delete this.state.conversationId;
    this.save();
  }

  forgetSession(): void {
    this.state = {};
    this.save();
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.state.session) headers["x-visitor-session"] = this.state.session;
    return headers;
  }

  private async call(path: string, init: RequestInit = {}): Promise<Response> {
    const res = await fetch(`/chatbots${path}`, { ...init, headers: this.headers(), credentials: "omit" });
    if (!res.ok) throw new VisitorError(res.status, sentenceFor(res.status));
    return res;
  }

  async profile(): Promise<Profile> {
    const res = await this.call(`/deployed/${this.chatbotId}`);
    return ((await res.json()) as { chatbot: Profile }).chatbot;
  }

  async login(password: string): Promise<void> {
    const res = await this.call(`/deployed/${this.chatbotId}/session`, {
      method: "POST",
      body: JSON.stringify({ password }),
    });
    this.state = { session: ((await res.json()) as { visitor_session: string }).visitor_session };
    this.save();
  }

  async history(): Promise<Message[]> {
    if (!this.state.conversationId || !this.state.session) return [];
    const res = await this.call(`/deployed/${this.chatbotId}/conversations/${this.state.conversationId}`);
    return ((await res.json()) as { conversation: { messages: Message[] } }).conversation.messages;
  }

  async like(messageId: string, feedback: "like" | "dislike" | "none"): Promise<void> {
    if (!this.state.conversationId) return;
    await this.call("/deployed/conversations/message/like", {
      method: "POST",
      body: JSON.stringify({
        chatbot_id: this.chatbotId,
        conversation_id: this.state.conversationId,
        message_id: messageId,
        feedback,
      }),
    });
  }

  async upload(file: File): Promise<void> {
    const form = new FormData();
    form.set("chatbot_id", this.chatbotId);
    if (this.state.conversationId) form.set("conversation_id", this.state.conversationId);
    if (this.state.session) form.set("visitor_session", this.state.session);
    form.set("file", file);
    const res = await fetch("/chatbots/upload", { method: "POST", body: form, credentials: "omit" });
    if (!res.ok) throw new VisitorError(res.status, sentenceFor(res.status));
    const body = (await res.json()) as { conversation_id?: string };
    if (body.conversation_id) this.state.conversationId = body.conversation_id;
    this.save();
  }

  /** Sends a message (text or recorded audio) and calls onPiece for each streamed piece of the answer. */
  async send(
    input: { text: string } | { audio: string; audio_mime_type: string },
    onPiece: (text: string) => void,
  ): Promise<RunResult> {
    const body = {
      ...input,
      stream: true,
      ...(this.state.conversationId ? { conversation_id: this.state.conversationId } : {}),
    };
    const res = await this.call(`/deployed/${this.chatbotId}/run`, { method: "POST", body: JSON.stringify(body) });
    const issued = res.headers.get("x-visitor-session");
    if (issued) this.state.session = issued;
    const result = await readEvents(res, onPiece);
    if (result.visitor_session) this.state.session = result.visitor_session;
    if (result.conversation_id) this.state.conversationId = result.conversation_id;
    this.save();
    return result;
  }
}

async function readEvents(res: Response, onPiece: (text: string) => void): Promise<RunResult> {
  if (!res.body) throw new VisitorError(500, sentenceFor(500));
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let final: RunResult | null = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 2);
      if (!block.startsWith("data: ")) continue;
      const event = JSON.parse(block.slice(6)) as { type?: string; output_value?: string } & RunResult;
      if (event.type === "stream") onPiece(event.output_value ?? "");
      else final = event;
    }
  }
  if (!final) throw new VisitorError(500, sentenceFor(500));
  return final;
}
