import { groundedAnswer, type Citation, type Passage } from "../../../providers/grounded-answer";
import type { ChatModel } from "../../../providers/types";
import type { UsageMeter } from "../../../providers/usage";

/** A retrieved item as the query service holds it. */
export interface RetrievedItem {
  id: string;
  document_id: string;
  score: number;
  text: string;
  metadata: Record<string, unknown>;
}

export interface QaAnswer {
  text: string;
  citations: Citation[];
  model: string;
  extractive: boolean;
  mode: "fast" | "accurate";
}

/** Items handed to one model call: enough context, bounded cost. */
const FAST_ITEMS = 8;
const ACCURATE_DOCUMENTS = 5;
const ACCURATE_ITEMS_PER_DOCUMENT = 4;

export function passageOf(item: RetrievedItem): Passage {
  const name = typeof item.metadata.name === "string" ? item.metadata.name : undefined;
  return { text: item.text, documentId: item.document_id, chunkId: item.id, title: name };
}

/**
 * `do_advanced_qa`. `fast`: one pass over the top items. `accurate`: an answer per document from
 * that document's items, then one answer combining them, whose [n] cite the documents.
 */
export async function advancedAnswer(
  model: ChatModel,
  question: string,
  items: RetrievedItem[],
  mode: "fast" | "accurate",
  usage: UsageMeter,
  signal?: AbortSignal,
): Promise<QaAnswer> {
  if (mode === "fast") {
    const answer = await groundedAnswer({
      model,
      question,
      passages: items.slice(0, FAST_ITEMS).map(passageOf),
      signal,
    });
    usage.add(answer.model, answer.usage);
    return { text: answer.text, citations: answer.citations, model: answer.model, extractive: answer.extractive, mode };
  }
  const byDocument = new Map<string, RetrievedItem[]>();
  for (const item of items) {
    const list = byDocument.get(item.document_id) ?? [];
    if (list.length < ACCURATE_ITEMS_PER_DOCUMENT) list.push(item);
    byDocument.set(item.document_id, list);
  }
  const documents = [...byDocument.entries()].slice(0, ACCURATE_DOCUMENTS);
  const partials = await Promise.all(
    documents.map(async ([documentId, docItems]) => {
      const answer = await groundedAnswer({ model, question, passages: docItems.map(passageOf), signal });
      usage.add(answer.model, answer.usage);
      // Inner [n] refer to this document's passages; the combining step cites documents instead.
      return {
        documentId,
        title: passageOf(docItems[0] as RetrievedItem).title,
        text: answer.text.replace(/\s*\[\d{1,3}\]/g, ""),
      };
    }),
  );
  const combined = await groundedAnswer({
    model,
    question,
    passages: partials.map((p) => ({ text: p.text, documentId: p.documentId, title: p.title })),
    instructions:
      "Each numbered source is an answer drawn from one document. Combine them into one answer, resolving disagreements explicitly.",
    signal,
  });
  usage.add(combined.model, combined.usage);
  return {
    text: combined.text,
    citations: combined.citations,
    model: combined.model,
    extractive: combined.extractive,
    mode,
  };
}
