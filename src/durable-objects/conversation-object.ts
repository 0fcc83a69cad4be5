import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { newId } from "../lib/ids";
import { cutHistory } from "../features/chatbots/history-budget";
import { setIsolateLogLevel } from "../lib/log";
import { applyMigrations, ownSchema, type SchemaMigration } from "./sqlite-schema";

/** A source an answer was drawn from, as stored with the answer. */
export interface MessageSource {
  knowledgeBaseId: string;
  documentId: string;
  chunkId: string;
  name: string | null;
  score: number;
  text: string;
}

export type MessageStatus = "pending" | "complete" | "failed" | "terminated";

export interface StoredMessage {
  id: string;
  seq: number;
  role: "user" | "assistant";
  content: string;
  status: MessageStatus;
  sources: MessageSource[];
  followUpQuestions: string[];
  answeredBy: string | null;
  error: string | null;
  feedback: "like" | "dislike" | null;
  replyTo: string | null;
  createdAt: string;
}

export interface StoredAttachment {
  id: string;
  name: string;
  mimeType: string;
  size: number;
  objectKey: string;
  createdAt: string;
}

export interface BeginInput {
  text: string;
  /** Tokens of earlier messages handed to the model with this turn. */
  historyBudget: number;
  /** The longest a turn may hold the conversation before the next one proceeds. */
  turnTimeoutMs: number;
}

/** A plain history turn (ChatMessage's optional tool fields do not cross RPC). */
export interface HistoryTurn {
  role: "user" | "assistant";
  content: string;
}

export type BeginResult =
  | {
      ok: true;
      turnId: string;
      userMessageId: string;
      history: HistoryTurn[];
      attachments: { name: string; text: string }[];
    }
  | { ok: false; userMessageId: string; reason: "terminated" | "interrupted" | "deleted" };

export interface CompleteInput {
  content: string;
  status: Exclude<MessageStatus, "pending">;
  sources: MessageSource[];
  followUpQuestions: string[];
  answeredBy: string | null;
  error: string | null;
}

export type CompleteResult =
  | { ok: true; messageId: string | null; status: Exclude<MessageStatus, "pending"> }
  | { ok: false; messageId: null; reason: "closed" | "deleted" };

interface Turn {
  userMessageId: string;
  previous: Promise<void>;
  release: () => void;
  terminated: boolean;
  /** The conversation was deleted while this turn waited or was answered. */
  deleted?: boolean;
  timer?: ReturnType<typeof setTimeout>;
}

type Row = Record<string, SqlStorageValue>;

const ATTACHMENT_TEXT_CAP = 20_000;

/** This object's SQLite schema, oldest step first (see sqlite-schema.ts). */
const CONVERSATION_SCHEMA: readonly SchemaMigration[] = [
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS messages (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      role TEXT NOT NULL,
      content TEXT NOT NULL,
      status TEXT NOT NULL,
      sources TEXT NOT NULL DEFAULT '[]',
      follow_up_questions TEXT NOT NULL DEFAULT '[]',
      answered_by TEXT,
      error TEXT,
      feedback TEXT,
      reply_to TEXT,
      created_at TEXT NOT NULL
    )`);
    sql.exec(`CREATE TABLE IF NOT EXISTS attachments (
      id TEXT PRIMARY KEY, name TEXT NOT NULL, mime_type TEXT NOT NULL, size INTEGER NOT NULL,
      object_key TEXT NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL
    )`);
  },
];

/**
 * Conversation order: each answer right after the message it answers. Storage order differs
 * (a message arriving while another is answered is stored before that answer).
 */
const TURN_ORDER = "COALESCE(u.seq, m.seq)";

/**
 * One conversation: its messages and attachments in its own SQLite, and the order in which its
 * turns are answered. A user message is written the moment it arrives (so concurrent messages
 * keep their arrival order and none is lost); its answer starts only when every earlier turn has
 * finished, so each answer sees the answers before it. The Worker produces the answer (it holds
 * the model and knowledge-base services) between `begin` and `complete`.
 */
export class ConversationObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly turns = new Map<string, Turn>();
  private tail: Promise<void> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    setIsolateLogLevel(env.LOG_LEVEL);
    this.sql = ctx.storage.sql;
    // Turns live in memory; after a restart nobody waits on them. A Worker still producing an
    // answer may yet complete its turn (see awaitingReply); until then the message reads as interrupted.
    ownSchema(ctx, CONVERSATION_SCHEMA, () =>
      this.sql.exec("UPDATE messages SET status = 'failed', error = 'interrupted' WHERE status = 'pending'"),
    );
  }

  /** Stores the user's message at once, then waits for every earlier turn before answering. */
  async begin(input: BeginInput): Promise<BeginResult> {
    const userMessageId = newId();
    this.sql.exec(
      "INSERT INTO messages (id, role, content, status, created_at) VALUES (?, 'user', ?, 'pending', ?)",
      userMessageId,
      input.text,
      new Date().toISOString(),
    );
    let release = (): void => undefined;
    const done = new Promise<void>((resolve) => (release = resolve));
    const turn: Turn = { userMessageId, previous: this.tail, release, terminated: false };
    this.tail = done;
    this.turns.set(userMessageId, turn);
    await turn.previous;
    if (turn.deleted) return { ok: false, userMessageId, reason: "deleted" };
    if (turn.terminated) {
      this.finish(userMessageId, {
        content: "",
        status: "terminated",
        sources: [],
        followUpQuestions: [],
        answeredBy: null,
        error: "terminated",
      });
      return { ok: false, userMessageId, reason: "terminated" };
    }
    // A Worker that dies mid-answer must not block the conversation forever.
    turn.timer = setTimeout(
      () =>
        this.finish(userMessageId, {
          content: "",
          status: "failed",
          sources: [],
          followUpQuestions: [],
          answeredBy: null,
          error: "the answer took too long",
        }),
      input.turnTimeoutMs,
    );
    const earlier = this.sql
      .exec<Row>(
        `SELECT m.role, m.content FROM messages m LEFT JOIN messages u ON u.id = m.reply_to
        WHERE ${TURN_ORDER} < (SELECT seq FROM messages WHERE id = ?) AND m.status = 'complete' AND m.content != ''
        ORDER BY ${TURN_ORDER}, m.role = 'assistant'`,
        userMessageId,
      )
      .toArray()
      .map(
        (row): HistoryTurn => ({ role: row.role === "assistant" ? "assistant" : "user", content: String(row.content) }),
      );
    const attachments = this.sql
      .exec<Row>("SELECT name, text FROM attachments WHERE text != '' ORDER BY created_at")
      .toArray()
      .map((row) => ({ name: String(row.name), text: String(row.text) }));
    return {
      ok: true,
      turnId: userMessageId,
      userMessageId,
      history: cutHistory(earlier, input.historyBudget),
      attachments,
    };
  }

  /** Whether the turn should keep generating (false once terminated). */
  async proceed(turnId: string): Promise<boolean> {
    const turn = this.turns.get(turnId);
    if (turn) return !turn.terminated;
    // Not in memory: the object restarted mid-answer. Keep going unless the turn was already closed.
    return this.awaitingReply(turnId);
  }

  /**
   * Stores the answer and lets the next turn proceed. Answers the stored assistant message id and
   * the status stored (terminated when the turn was stopped meanwhile); when nothing is stored,
   * why: the turn was already closed (timed out), or its conversation was deleted.
   */
  async complete(turnId: string, input: CompleteInput): Promise<CompleteResult> {
    const turn = this.turns.get(turnId);
    if (!turn && !this.awaitingReply(turnId))
      return { ok: false, messageId: null, reason: this.hasMessage(turnId) ? "closed" : "deleted" };
    const status = turn?.terminated && input.status === "complete" ? "terminated" : input.status;
    return { ok: true, messageId: this.finish(turnId, { ...input, status }), status };
  }

  private hasMessage(id: string): boolean {
    return this.sql.exec<Row>("SELECT 1 FROM messages WHERE id = ?", id).toArray().length > 0;
  }

  /** A stored user message with no answer yet (its turn may have been lost to a restart). */
  private awaitingReply(turnId: string): boolean {
    const row = this.sql
      .exec<Row>(
        "SELECT (SELECT COUNT(*) FROM messages WHERE reply_to = ?) AS replies FROM messages WHERE id = ? AND role = 'user'",
        turnId,
        turnId,
      )
      .toArray()[0];
    return row !== undefined && Number(row.replies) === 0;
  }

  private finish(turnId: string, input: CompleteInput): string | null {
    const turn = this.turns.get(turnId);
    if (!turn && !this.awaitingReply(turnId)) return null;
    this.turns.delete(turnId);
    if (turn?.timer) clearTimeout(turn.timer);
    const messageId = newId();
    this.sql.exec("UPDATE messages SET status = ?, error = NULL WHERE id = ?", input.status, turnId);
    this.sql.exec(
      "INSERT INTO messages (id, role, content, status, sources, follow_up_questions, answered_by, error, reply_to, created_at) VALUES (?, 'assistant', ?, ?, ?, ?, ?, ?, ?, ?)",
      messageId,
      input.content,
      input.status,
      JSON.stringify(input.sources),
      JSON.stringify(input.followUpQuestions),
      input.answeredBy,
      input.error,
      turnId,
      new Date().toISOString(),
    );
    turn?.release();
    return messageId;
  }

  /** Stops the turn being answered and every queued one. */
  async terminate(): Promise<{ terminated: number }> {
    for (const turn of this.turns.values()) turn.terminated = true;
    return { terminated: this.turns.size };
  }

  async read(): Promise<{ messages: StoredMessage[]; attachments: StoredAttachment[] }> {
    const messages = this.sql
      .exec<Row>(
        `SELECT m.* FROM messages m LEFT JOIN messages u ON u.id = m.reply_to ORDER BY ${TURN_ORDER}, m.role = 'assistant'`,
      )
      .toArray()
      .map(toMessage);
    const attachments = this.sql
      .exec<Row>("SELECT id, name, mime_type, size, object_key, created_at FROM attachments ORDER BY created_at")
      .toArray()
      .map((row) => ({
        id: String(row.id),
        name: String(row.name),
        mimeType: String(row.mime_type),
        size: Number(row.size),
        objectKey: String(row.object_key),
        createdAt: String(row.created_at),
      }));
    return { messages, attachments };
  }

  /** Likes or dislikes one of the chatbot's answers in this conversation. */
  async setFeedback(
    messageId: string,
    feedback: "like" | "dislike" | null,
  ): Promise<"ok" | "not_found" | "not_an_answer"> {
    const row = this.sql.exec<Row>("SELECT role FROM messages WHERE id = ?", messageId).toArray()[0];
    if (!row) return "not_found";
    if (row.role !== "assistant") return "not_an_answer";
    this.sql.exec("UPDATE messages SET feedback = ? WHERE id = ?", feedback, messageId);
    return "ok";
  }

  async addAttachment(attachment: StoredAttachment & { text: string }): Promise<void> {
    this.sql.exec(
      "INSERT INTO attachments (id, name, mime_type, size, object_key, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      attachment.id,
      attachment.name,
      attachment.mimeType,
      attachment.size,
      attachment.objectKey,
      attachment.text.slice(0, ATTACHMENT_TEXT_CAP),
      attachment.createdAt,
    );
  }

  /**
   * Forgets everything; answers the attachment object keys so the caller can delete the files.
   * Every turn is closed first: the one being answered learns it was deleted (proceed answers
   * false, complete stores nothing) and the ones queued behind it are released at once, so no
   * caller waits on a turn that no longer exists. The schema is stood up again, because the
   * object lives on (a late call must find empty tables, not "no such table").
   */
  async destroy(): Promise<string[]> {
    const keys = this.sql
      .exec<Row>("SELECT object_key FROM attachments")
      .toArray()
      .map((row) => String(row.object_key));
    for (const turn of this.turns.values()) {
      turn.terminated = true;
      turn.deleted = true;
      if (turn.timer) clearTimeout(turn.timer);
    }
    const closed = [...this.turns.values()];
    this.turns.clear();
    this.tail = Promise.resolve();
    await this.ctx.storage.deleteAll();
    applyMigrations(this.ctx.storage, CONVERSATION_SCHEMA);
    for (const turn of closed) turn.release();
    return keys;
  }
}

function parseJsonArray<T>(value: SqlStorageValue): T[] {
  try {
    const parsed: unknown = JSON.parse(String(value ?? "[]"));
    return Array.isArray(parsed) ? (parsed as T[]) : [];
  } catch {
    return [];
  }
}

function toMessage(row: Row): StoredMessage {
  return {
    id: String(row.id),
    seq: Number(row.seq),
    role: row.role === "assistant" ? "assistant" : "user",
    content: String(row.content),
    status: String(row.status) as MessageStatus,
    sources: parseJsonArray<MessageSource>(row.sources),
    followUpQuestions: parseJsonArray<string>(row.follow_up_questions),
    answeredBy: row.answered_by === null ? null : String(row.answered_by),
    error: row.error === null ? null : String(row.error),
    feedback: row.feedback === "like" || row.feedback === "dislike" ? row.feedback : null,
    replyTo: row.reply_to === null ? null : String(row.reply_to),
    createdAt: String(row.created_at),
  };
}
