import type { Env } from "../../env";
import { badRequest } from "../../lib/errors";
import { decodeClientBase64 } from "../../lib/base64";
import { newId } from "../../lib/ids";
import type { ChatbotRow } from "./chatbots.service";
import {
  conversationStub,
  createConversation,
  findConversation,
  type ConversationActor,
} from "./conversations.service";
import { putFile } from "../../db/files";

/** Documents a conversation accepts: text the answerer can read directly. */
const TYPES_BY_EXTENSION: Record<string, string> = {
  txt: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  json: "application/json",
};
const ALLOWED_TYPES = new Set(Object.values(TYPES_BY_EXTENSION));
export const MAX_UPLOAD_BYTES = 1024 * 1024;
/** Files one upload may carry (the hosted SDK's `files` parts). */
export const MAX_UPLOAD_FILES = 10;
/** The upload routes' body cap: each 1 MiB document is about 1.4 MiB as base64, plus the other fields. */
export const MAX_UPLOAD_BODY_BYTES = MAX_UPLOAD_FILES * 1.5 * 1024 * 1024;

export interface UploadedFile {
  raw_bytes: string;
  metadata: { name: string; mime_type: string; size: number };
}

function mimeTypeOf(file: UploadedFile, field: string): string {
  const declared = file.metadata.mime_type.split(";")[0].trim().toLowerCase();
  if (ALLOWED_TYPES.has(declared)) return declared;
  const extension = file.metadata.name.split(".").pop()?.toLowerCase() ?? "";
  const byName = TYPES_BY_EXTENSION[extension];
  if (byName && (declared === "" || declared === "application/octet-stream")) return byName;
  throw badRequest(`${field}: type ${declared || "unknown"} is not accepted; send text, markdown, CSV or JSON`);
}

interface CheckedFile {
  name: string;
  mimeType: string;
  bytes: Uint8Array;
  text: string;
}

/** Type, size and encoding of one file; `field` names it in errors. Nothing is stored yet. */
function checkFile(file: UploadedFile, field: string): CheckedFile {
  const mimeType = mimeTypeOf(file, field);
  const bytes = decodeClientBase64(file.raw_bytes, field, MAX_UPLOAD_BYTES);
  if (bytes.length === 0) throw badRequest(`${field}: is empty`);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw badRequest(`${field}: is not UTF-8 text`);
  }
  return { name: file.metadata.name.slice(0, 200) || "document", mimeType, bytes, text };
}

/**
 * Checks every file first, then stores each in R2 and attaches its text to the actor's
 * conversation (a new one, named after the first file, when none is named): one bad file leaves
 * nothing behind.
 */
async function attach(
  env: Env,
  chatbot: ChatbotRow,
  actor: ConversationActor,
  conversationId: string | undefined,
  files: CheckedFile[],
) {
  const conversation = conversationId
    ? await findConversation(env, chatbot, actor, conversationId)
    : await createConversation(env, chatbot, actor, files[0].name);
  const stub = conversationStub(env, conversation.id);
  const attached = [];
  for (const file of files) {
    const id = newId();
    const objectKey = `chatbots/${chatbot.id}/conversations/${conversation.id}/${id}`;
    await putFile(env, objectKey, file.bytes, { contentType: file.mimeType });
    const createdAt = new Date().toISOString();
    await stub.addAttachment({
      id,
      name: file.name,
      mimeType: file.mimeType,
      size: file.bytes.length,
      objectKey,
      createdAt,
      text: file.text,
    });
    attached.push({ _id: id, name: file.name, mimeType: file.mimeType, size: file.bytes.length, createdAt });
  }
  return { conversationId: conversation.id, attached };
}

export interface UploadInput {
  conversation_id?: string;
  file?: UploadedFile;
  files?: UploadedFile | UploadedFile[];
}

/**
 * Both upload forms. `file` (Loom's): one document, answered `{conversation_id, attachment}` as
 * before. `files` (the hosted SDK's `upload_files`): one or more, answered `{conversation_id,
 * knowledge_base_id, uploaded_files, document_id}`. Loom keeps uploads in the conversation's own
 * attachment store rather than a temporary knowledge base, so `knowledge_base_id` is the id of
 * that store, which is the conversation id, and `document_id` lists the attachment ids in order.
 */
export async function attachUploads(env: Env, chatbot: ChatbotRow, actor: ConversationActor, input: UploadInput) {
  if (input.file !== undefined && input.files !== undefined) throw badRequest("give file or files, not both");
  if (input.file !== undefined) {
    const { conversationId, attached } = await attach(env, chatbot, actor, input.conversation_id, [
      checkFile(input.file, "file"),
    ]);
    return { conversation_id: conversationId, attachment: attached[0] };
  }
  const list = input.files === undefined ? [] : Array.isArray(input.files) ? input.files : [input.files];
  if (list.length === 0)
    throw badRequest("files: attach at least one file (multipart parts named files, or one named file)");
  if (list.length > MAX_UPLOAD_FILES) throw badRequest(`files: at most ${MAX_UPLOAD_FILES} files at once`);
  const checked = list.map((file, i) => checkFile(file, list.length === 1 ? "files" : `files[${i}]`));
  const { conversationId, attached } = await attach(env, chatbot, actor, input.conversation_id, checked);
  return {
    conversation_id: conversationId,
    knowledge_base_id: conversationId,
    uploaded_files: attached.map((a) => ({ name: a.name, mime_type: a.mimeType, size: a.size, document_id: a._id })),
    document_id: attached.map((a) => a._id),
  };
}
