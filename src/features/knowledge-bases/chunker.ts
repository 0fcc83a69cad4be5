/**
 * Token-based chunking that respects sentences and Markdown structure.
 *
 * A token is a run of letters/digits or one punctuation mark (what `chunk_size` and
 * `chunk_overlap` count). Chunks are slices of the original text, so citations quote it exactly.
 * A Markdown heading always starts a new chunk; otherwise whole sentences are packed until the
 * next one would pass `chunk_size`; a sentence longer than `chunk_size` is cut at token bounds.
 */

export const CHUNK_SIZE_MIN = 16;
export const CHUNK_SIZE_MAX = 4096;
export const CHUNK_OVERLAP_MAX = 2048;

export interface TextChunk {
  text: string;
  /** Index of this chunk in its document, from 0. */
  position: number;
  tokenCount: number;
  /** The nearest Markdown heading above the chunk, if any. */
  section?: string;
}

interface Token {
  start: number;
  end: number;
}

const TOKEN = /[\p{L}\p{N}_]+|[^\p{L}\p{N}_\s]/gu;

export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  for (const match of text.matchAll(TOKEN)) tokens.push({ start: match.index, end: match.index + match[0].length });
  return tokens;
}

export function countTokens(text: string): number {
  let n = 0;
  for (const _ of text.matchAll(TOKEN)) n++;
  return n;
}

interface Unit {
  /** Token range [from, to). */
  from: number;
  to: number;
  /** A heading line: forces a chunk boundary before it. */
  heading?: string;
}

const HEADING_LINE = /^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$/;

/** Splits the token stream into sentences and heading lines. */
function units(text: string, tokens: Token[]): Unit[] {
  const out: Unit[] = [];
  let from = 0;
  const close = (to: number, heading?: string) => {
    if (to > from) out.push({ from, to, heading });
    from = to;
  };
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    // A heading starts at a line start: emit what came before, then the heading line alone.
    // Only a '#' can open a heading, so the (backward) line search runs for those alone.
    const lineStart = text[token.start] === "#" ? text.lastIndexOf("\n", token.start - 1) + 1 : -1;
    if (i === from && lineStart >= 0 && text.slice(lineStart, token.start).trim() === "") {
      const lineEnd = text.indexOf("\n", token.start);
      const line = text.slice(lineStart, lineEnd === -1 ? text.length : lineEnd);
      const match = HEADING_LINE.exec(line);
      if (match) {
        let j = i;
        while (j < tokens.length && tokens[j].start < (lineEnd === -1 ? text.length : lineEnd)) j++;
        close(j, match[1]);
        i = j - 1;
        continue;
      }
    }
    const next = tokens[i + 1];
    const ch = text[token.start];
    const terminal = token.end - token.start === 1 && (ch === "." || ch === "!" || ch === "?" || ch === "。");
    const gap = next ? text.slice(token.end, next.start) : "";
    const paragraphBreak =
      /\n\s*\n/.test(gap) || (gap.includes("\n") && next !== undefined && text[next.start] === "#");
    const lineBreakInList = gap.includes("\n") && next !== undefined && /[-*|]/.test(text[next.start]);
    if ((terminal && /\s/.test(gap[0] ?? " ")) || paragraphBreak || lineBreakInList) close(i + 1);
  }
  close(tokens.length);
  return out;
}

export interface ChunkOptions {
  chunkSize: number;
  chunkOverlap: number;
}

/** Chunks `text`; empty or whitespace-only text gives no chunks. */
export function chunkText(text: string, options: ChunkOptions): TextChunk[] {
  const { chunkSize, chunkOverlap } = options;
  const tokens = tokenize(text);
  if (tokens.length === 0) return [];
  const chunks: TextChunk[] = [];
  let section: string | undefined;
  let chunkFrom = -1;
  let chunkTo = -1;
  let chunkSection: string | undefined;

  const emit = () => {
    if (chunkFrom < 0 || chunkTo <= chunkFrom) return;
    const body = text.slice(tokens[chunkFrom].start, tokens[chunkTo - 1].end).trim();
    if (body)
      chunks.push({ text: body, position: chunks.length, tokenCount: chunkTo - chunkFrom, section: chunkSection });
  };
  /** Where the next chunk begins: `chunkOverlap` tokens back, never before the last start. */
  const restartAt = (end: number) => Math.max(chunkFrom + 1, end - chunkOverlap);

  for (const unit of units(text, tokens)) {
    if (unit.heading !== undefined) {
      emit();
      section = unit.heading;
      chunkFrom = unit.from;
      chunkTo = unit.to;
      chunkSection = section;
      continue;
    }
    if (chunkFrom < 0) {
      chunkFrom = unit.from;
      chunkTo = unit.from;
      chunkSection = section;
    }
    let cursor = unit.from;
    while (cursor < unit.to) {
      const room = chunkSize - (chunkTo - chunkFrom);
      if (room <= 0 && !(chunkTo > chunkFrom && unit.to - unit.from <= chunkSize)) {
        // A full chunk before an over-long sentence (or an over-long heading line): close it and
        // go on from the overlap.
        emit();
        chunkFrom = Math.min(restartAt(chunkTo), cursor);
        chunkTo = cursor;
        chunkSection = section;
        continue;
      }
      const remaining = unit.to - cursor;
      if (remaining <= room) {
        chunkTo = unit.to;
        cursor = unit.to;
        break;
      }
      // The sentence does not fit. Close the current chunk at a sentence bound if it has content;
      // a sentence alone longer than a chunk is cut at the token limit.
      if (chunkTo > chunkFrom && unit.to - unit.from <= chunkSize) {
        emit();
        chunkFrom = Math.min(restartAt(chunkTo), unit.from);
        chunkSection = section;
        if (unit.to - chunkFrom > chunkSize) chunkFrom = unit.from;
        chunkTo = unit.from;
        continue;
      }
      chunkTo = cursor + room;
      cursor = chunkTo;
      emit();
      chunkFrom = restartAt(chunkTo);
      chunkTo = cursor;
      chunkSection = section;
    }
  }
  emit();
  return chunks;
}
