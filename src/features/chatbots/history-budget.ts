import type { ChatMessage } from "../../providers/types";

/** Tokens as the splitter counts them: words and punctuation marks. Cheap and model-independent. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu)?.length ?? 0;
}

/**
 * Keeps the newest messages whose tokens fit in `budget`, oldest first. A turn is never split:
 * when the newest message alone is over budget, the history is empty, since the question itself
 * travels separately.
 */
export function cutHistory<T extends Pick<ChatMessage, "content">>(messages: readonly T[], budget: number): T[] {
  const kept: T[] = [];
  let used = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const cost = countTokens(messages[i].content) + 4;
    if (used + cost > budget) break;
    used += cost;
    kept.push(messages[i]);
  }
  return kept.reverse();
}

/** A conversation's name from its first message: the first line, cut at a word near 60 characters. */
export function conversationNameFrom(text: string): string {
  const line = text.trim().split(/\r?\n/)[0]?.replace(/\s+/g, " ") ?? "";
  if (line.length === 0) return "New conversation";
  if (line.length <= 60) return line;
  const cut = line.slice(0, 60);
  const space = cut.lastIndexOf(" ");
  return `${(space > 30 ? cut.slice(0, space) : cut).trimEnd()}…`;
}
