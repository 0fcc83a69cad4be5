import type { Env } from "../../env";
import { AppError, badRequest } from "../../lib/errors";
import { decodeClientBase64 } from "../../lib/base64";
import { newId } from "../../lib/ids";
import type { ChatbotRow } from "./chatbots.service";
import { conversationStub, createConversation, findConversation, type ConversationActor } from "./conversations.service";

/** Documents a conversation accepts: text the answerer can read directly. */
const TYPES_BY_EXTENSION: Record<string, string> = { txt: "text/plain", md: "text/markdown", markdown: "text/markdown", csv: "text/csv", json: "application/json" };
const ALLOWED_TYPES = new Set(Object.values(TYPES_BY_EXTENSION));
export const MAX_UPLOAD_BYTES = 1024 * 1024;
/** The upload routes' body cap: a 1 MiB document is about 1.4 MiB as base64, plus the other fields. */
export const MAX_UPLOAD_BODY_BYTES = 2 * 1024 * 1024;

export interface UploadedFile {
  raw_bytes: string;
  metadata: { name: string; mime_type: string; size: number };
}

function mimeTypeOf(file: UploadedFile): string {
  const declared = file.metadata.mime_type.split(";")[0].trim().toLowerCase();
  if (ALLOWED_TYPES.has(declared)) return declared;
  const extension = file.metadata.name.split(".").pop()?.toLowerCase() ?? "";
  const byName = TYPES_BY_EXTENSION[extension];
  if (byName && (declared === "" || declared === "application/octet-stream")) return byName;
  throw badRequest(`file: type ${declared || "unknown"} is not accepted; send text, markdown, CSV or JSON`);
}

/** Stores a document in R2 and attaches its text to the actor's conversation (a new one when none is named). */
export async function attachDocument(env: Env, chatbot: ChatbotRow, actor: ConversationActor, conversationId: string | undefined, file: UploadedFile) {
  const mimeType = mimeTypeOf(file);
  const bytes = decodeClientBase64(file.raw_bytes, "file", MAX_UPLOAD_BYTES);
  if (bytes.length === 0) throw badRequest("file: is empty");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw badRequest("file: is not UTF-8 text");
  }
  const name = file.metadata.name.slice(0, 200) || "document";
  const conversation = conversationId ? await findConversation(env, chatbot, actor, conversationId) : await createConversation(env, chatbot, actor, name);
  const id = newId();
  const objectKey = `chatbots/${chatbot.id}/conversations/${conversation.id}/${id}`;
  await env.FILES.put(objectKey, bytes, { httpMetadata: { contentType: mimeType } });
  const createdAt = new Date().toISOString();
  await conversationStub(env, conversation.id).addAttachment({ id, name, mimeType, size: bytes.length, objectKey, createdAt, text });
  return { conversation_id: conversation.id, attachment: { _id: id, name, mimeType, size: bytes.length, createdAt } };
}
