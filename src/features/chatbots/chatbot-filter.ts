import { badRequest } from "../../lib/errors";
import { FilterParseError, parseQdrantFilter } from "../knowledge-bases/metadata-filter";
import { MAX_FILTER_CHARS } from "../knowledge-bases/knowledge-bases.schemas";

type Json = Record<string, unknown>;

/** Which of a chatbot's knowledge bases one message searches, and the metadata filter for each. */
export interface KnowledgeScope {
  knowledgeBaseIds: string[];
  /** Per knowledge base id: a filter in the knowledge-base query's `filter` language. */
  filters: Record<string, Json>;
}

/** Items one `filter_items` list may hold. */
export const MAX_FILTER_ITEMS = 100;

// The hosted SDK's InterfaceFilter enums, by value and by name.
const OBJECT_TYPES = [
  "knowledge_base",
  "knowledge_base_document",
  "integration",
  "integration_item",
  "knowledge_base_folder",
] as const;
const SELECTION_MODES = ["deselect", "select"] as const;

function enumName<T extends readonly string[]>(names: T, value: unknown, where: string): T[number] {
  if (typeof value === "number" && Number.isInteger(value) && value >= 0 && value < names.length) return names[value];
  if (typeof value === "string" && (names as readonly string[]).includes(value)) return value;
  throw badRequest(`${where}: must be one of ${names.map((n, i) => `${i} (${n})`).join(", ")}`);
}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The SDK's `InterfaceFilter` `{filter_items: [{object_type, object_id, document_id}], selection_mode}`:
 * `select` searches only the knowledge bases and documents listed, `deselect` all but them. Every
 * knowledge base named must be one of the chatbot's own (its ids are not an oracle for others').
 * Loom has no integrations or knowledge-base folders, so items of those types are refused.
 */
function interfaceScope(chatbotKbs: string[], filter: Json): KnowledgeScope {
  const mode = enumName(SELECTION_MODES, filter.selection_mode, "filter.selection_mode");
  const items = filter.filter_items;
  if (!Array.isArray(items)) throw badRequest("filter.filter_items: must be a list");
  if (items.length > MAX_FILTER_ITEMS) throw badRequest(`filter.filter_items: at most ${MAX_FILTER_ITEMS} items`);
  const wholeKbs = new Set<string>();
  const documents = new Map<string, Set<string>>();
  items.forEach((item, i) => {
    const at = `filter.filter_items[${i}]`;
    if (!isObject(item)) throw badRequest(`${at}: must be an object`);
    const type = enumName(OBJECT_TYPES, item.object_type, `${at}.object_type`);
    if (type !== "knowledge_base" && type !== "knowledge_base_document")
      throw badRequest(
        `${at}.object_type: ${type} is not available in Loom (it has no integrations or knowledge-base folders); select knowledge bases or their documents`,
      );
    if (typeof item.object_id !== "string" || !chatbotKbs.includes(item.object_id))
      throw badRequest(`${at}.object_id: must be the id of one of this chatbot's knowledge bases`);
    if (type === "knowledge_base") {
      wholeKbs.add(item.object_id);
      return;
    }
    if (typeof item.document_id !== "string" || !/^[0-9a-f]{24}$/.test(item.document_id))
      throw badRequest(`${at}.document_id: must be a document id`);
    const set = documents.get(item.object_id) ?? new Set<string>();
    set.add(item.document_id);
    documents.set(item.object_id, set);
  });
  const hasIds = (kbId: string) => [...(documents.get(kbId) ?? [])];
  if (mode === "select") {
    const knowledgeBaseIds = chatbotKbs.filter((kb) => wholeKbs.has(kb) || documents.has(kb));
    const filters: Record<string, Json> = {};
    for (const kb of knowledgeBaseIds) if (!wholeKbs.has(kb)) filters[kb] = { must: [{ has_id: hasIds(kb) }] };
    return { knowledgeBaseIds, filters };
  }
  const knowledgeBaseIds = chatbotKbs.filter((kb) => !wholeKbs.has(kb));
  const filters: Record<string, Json> = {};
  for (const kb of knowledgeBaseIds) if (documents.has(kb)) filters[kb] = { must_not: [{ has_id: hasIds(kb) }] };
  return { knowledgeBaseIds, filters };
}

/**
 * A run's `filter`: the SDK's InterfaceFilter (it has `filter_items`), or else a metadata filter in
 * the knowledge-base query's `filter` language (an object or its JSON text), applied to every one
 * of the chatbot's knowledge bases. Checked here, before the message is stored, so a bad filter is
 * a plain 400.
 */
export function knowledgeScope(chatbotKbs: string[], filter: string | Json): KnowledgeScope {
  if (isObject(filter) && "filter_items" in filter) return interfaceScope(chatbotKbs, filter);
  if (JSON.stringify(filter).length > MAX_FILTER_CHARS)
    throw badRequest(`filter: must be at most ${MAX_FILTER_CHARS} characters`);
  let parsed: Json;
  try {
    parseQdrantFilter(filter);
    parsed = typeof filter === "string" ? (JSON.parse(filter) as Json) : filter;
  } catch (error) {
    if (error instanceof FilterParseError) throw badRequest(`filter: ${error.message}`);
    throw error;
  }
  return { knowledgeBaseIds: chatbotKbs, filters: Object.fromEntries(chatbotKbs.map((kb) => [kb, parsed])) };
}
