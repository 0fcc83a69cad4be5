import { badRequest } from "./errors";
import { toBase64 } from "./crypto";
import { MAX_JSON_DEPTH } from "./json-depth";

/** Largest request body a route reads unless it sets its own cap (`maxBodyBytes`), in bytes. Larger bodies answer 413. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** The same for routes anyone may call without credentials (sign-up, login, visitor sessions): they carry small forms. */
export const MAX_ANONYMOUS_BODY_BYTES = 1024 * 1024;

export { MAX_JSON_DEPTH };

/** What a file part of a multipart body becomes, so all three encodings give the same shape. */
export interface FilePartValue {
  type: "file";
  raw_bytes: string;
  metadata: { name: string; mime_type: string; size: number };
}

const FORBIDDEN_KEYS = new Set(["__proto__", "prototype", "constructor"]);

type Json = Record<string, unknown>;

function isPlainObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Fills `target` with what `source` has that `target` lacks, recursively; `target`'s own values win. */
function mergeMissing(target: Json, source: Json): void {
  for (const [key, value] of Object.entries(source)) {
    const existing = target[key];
    if (existing === undefined) target[key] = value;
    else if (isPlainObject(existing) && isPlainObject(value)) mergeMissing(existing, value);
  }
}

/**
 * A form field sent as `true` beside dotted fields under it (`file_data=true`,
 * `file_data.metadata.name=...`, as the hosted platform's SDK sends a file) only says the object
 * is present: the dotted fields are the object.
 */
function isPresenceFlag(value: unknown): boolean {
  return typeof value === "string" && value.trim().toLowerCase() === "true";
}

function isFilePart(value: unknown): boolean {
  return isPlainObject(value) && value.type === "file" && typeof value.raw_bytes === "string";
}

/** Sets `value` at a dotted path, turning repeated keys into arrays and merging objects. */
function setPath(target: Json, dotted: string, value: unknown): void {
  const parts = dotted.split(".");
  if (parts.some((p) => p === "" || FORBIDDEN_KEYS.has(p)))
    throw badRequest(`invalid field name: ${dotted.slice(0, 100)}`);
  if (parts.length > MAX_JSON_DEPTH) throw badRequest(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const existing = node[part];
    if (isPlainObject(existing)) {
      node = existing;
    } else if (typeof existing === "string" && existing.trim().startsWith("{")) {
      // A nested object sent as a JSON string in one field, then refined by dotted fields.
      const parsed = tryParseJson(existing);
      if (!isPlainObject(parsed)) throw badRequest(`field ${part} must be an object`);
      node[part] = parsed;
      node = parsed;
    } else if (existing === undefined || isPresenceFlag(existing)) {
      const child: Json = {};
      node[part] = child;
      node = child;
    } else {
      throw badRequest(`field ${part} is given both as a value and as an object`);
    }
  }
  const last = parts[parts.length - 1];
  const existing = node[last];
  if (existing === undefined) node[last] = value;
  // Two file parts of one name are two files (the hosted SDK's `files` parts), never one merged.
  else if (isFilePart(existing) && isFilePart(value)) node[last] = [existing, value];
  // Explicit dotted fields (set first) refine a file part or JSON object rather than being lost.
  else if (isPlainObject(existing) && isPlainObject(value)) mergeMissing(existing, value);
  else if (isPlainObject(existing) && isPresenceFlag(value)) return;
  else if (Array.isArray(existing)) existing.push(value);
  else node[last] = [existing, value];
}

/**
 * What makes a parsed value unfit to use, or null: nesting past MAX_JSON_DEPTH, or an own
 * `__proto__` key (JSON.parse creates one; copying it onto another object sets that object's
 * prototype). Iterative, so even a value nested far too deep is measured without recursion.
 */
export function jsonShapeProblem(value: unknown): string | null {
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop() as [unknown, number];
    if (typeof node !== "object" || node === null) continue;
    if (depth >= MAX_JSON_DEPTH) return `nests deeper than ${MAX_JSON_DEPTH} levels`;
    if (!Array.isArray(node) && Object.hasOwn(node, "__proto__")) return "has a field named __proto__";
    for (const child of Object.values(node))
      if (typeof child === "object" && child !== null) pending.push([child, depth + 1]);
  }
  return null;
}

/** Parses JSON text from a client; undefined when it does not parse or its shape is unfit (jsonShapeProblem). */
export function tryParseJson(text: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  return jsonShapeProblem(parsed) === null ? parsed : undefined;
}

/**
 * `value` without its members that are null. A declared field sent as null is "not set": the
 * hosted platform's SDK sends every option it leaves unset as null. Applied to the body's own
 * fields here and to each declared nested object by `zJsonObject`; free-form data (transformation
 * and pipeline inputs, metadata, filters) keeps its nulls, which are the caller's values.
 */
export function withoutNullMembers(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([, member]) => member !== null));
}

/**
 * A file part's name as the client meant it. `aiohttp` (the SDK's async twins) percent-encodes
 * the name it sends (the path as opened: `%2Ftmp%2Fnotes.txt`), which `requests` and browsers do
 * not; decoded, it reads as the same name the sync client would send for that path.
 */
export function partFileName(raw: string): string {
  if (!/%[0-9A-Fa-f]{2}/.test(raw)) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    // Not valid percent-encoding: the name as written.
    return raw;
  }
}

async function fileToValue(file: File): Promise<FilePartValue> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  return {
    type: "file",
    raw_bytes: toBase64(bytes),
    metadata: { name: partFileName(file.name), mime_type: file.type || "application/octet-stream", size: bytes.length },
  };
}

/** Turns url-encoded or multipart form entries into one nested object (dotted names nest). */
export async function formToObject(form: FormData): Promise<Json> {
  const out: Json = {};
  // Plain fields first, so a JSON-string object field exists before dotted refinements or file parts.
  const entries = [...form.entries()];
  for (const [key, value] of entries) {
    if (typeof value === "string") setPath(out, key, value);
  }
  for (const [key, value] of entries) {
    if (typeof value !== "string") setPath(out, key, await fileToValue(value as File));
  }
  return out;
}

function checkedShape(body: Json): Json {
  const problem = jsonShapeProblem(body);
  if (problem) throw badRequest(`request body ${problem}`);
  return body;
}

/**
 * `curl -d '{...}'` sends JSON labelled as a form; read as a form it is one field named by the whole
 * text and every real field looks missing. No form field is ever named like that, so say what happened.
 */
function refuseJsonSentAsForm(buffer: Uint8Array): void {
  const text = new TextDecoder().decode(buffer).trim();
  if (!text.startsWith("{") || !isPlainObject(tryParseJson(text))) return;
  throw badRequest(
    "the body is JSON but was sent as a form (content-type: application/x-www-form-urlencoded, which curl -d sets); send it with the header content-type: application/json",
  );
}

/**
 * Parses a request body (read and bounded by the route's body cap, middleware/body-cap.ts) sent
 * as JSON, multipart/form-data or x-www-form-urlencoded into one plain object. An empty body is
 * `{}`. A body that is not an object, does not parse, nests past MAX_JSON_DEPTH or holds a
 * `__proto__` key is a 400.
 */
export async function parseBodyBytes(buffer: Uint8Array, contentTypeHeader: string): Promise<Json> {
  const contentType = contentTypeHeader.toLowerCase();
  if (buffer.byteLength === 0) return {};
  if (contentType.startsWith("application/x-www-form-urlencoded")) refuseJsonSentAsForm(buffer);
  if (contentType.startsWith("multipart/form-data") || contentType.startsWith("application/x-www-form-urlencoded")) {
    let form: FormData;
    try {
      form = await new Response(buffer, { headers: { "content-type": contentTypeHeader } }).formData();
    } catch {
      throw badRequest("request body is not valid form data");
    }
    return checkedShape(await formToObject(form));
  }
  const text = new TextDecoder().decode(buffer);
  if (text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest("request body is not valid JSON");
  }
  if (!isPlainObject(parsed)) throw badRequest("request body must be a JSON object");
  return withoutNullMembers(checkedShape(parsed)) as Json;
}

/** `parseBodyBytes` for a whole request whose body nothing has bounded yet (tests, internal callers). */
export async function parseRequestBody(request: Request): Promise<Json> {
  return parseBodyBytes(new Uint8Array(await request.arrayBuffer()), request.headers.get("content-type") ?? "");
}
