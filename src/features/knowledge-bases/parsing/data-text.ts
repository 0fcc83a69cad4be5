import { ExtractionError, PARSE_LIMITS, TextBudget } from "./parse-limits";

/** Splits CSV text into rows of fields (RFC 4180 quoting). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"' && field === "") quoted = true;
    else if (ch === ",") {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += ch;
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.some((f) => f.trim() !== ""));
}

/**
 * Each CSV row becomes one line of `column: value` pairs, so a row is a searchable unit. The
 * header is repeated on every row, so a small file can ask for a huge text: it is counted.
 */
export function csvToText(text: string): string {
  const rows = parseCsv(text);
  if (rows.length === 0) return "";
  const header = rows[0];
  const budget = new TextBudget("CSV");
  const lines: string[] = [];
  for (const row of rows.slice(1)) {
    const line = row.map((value, i) => `${header[i] ?? `column ${i + 1}`}: ${value}`).join("; ") + ".";
    budget.spend(line.length + 2);
    lines.push(line);
  }
  return lines.join("\n\n");
}

/**
 * Deepest nesting of arrays and objects, found by one pass over the text (strings skipped), so
 * that a hostile file is refused before anything recursive looks at it.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return deepest;
}

const MAX_JSON_LINES = 200_000;

/** A JSON array or object being walked. */
interface Frame {
  children: [string, unknown][] | unknown[];
  array: boolean;
  next: number;
  path: string;
}

function childOf(path: string, [key, child]: [string, unknown]): [string, unknown] {
  return [path ? `${path}.${key}` : key, child];
}

/** JSON becomes `path: value` lines, one per leaf, in document order. */
export function jsonToText(text: string): string {
  const depth = jsonDepth(text);
  if (depth > PARSE_LIMITS.jsonDepth)
    throw new ExtractionError(`the JSON file nests ${depth} levels deep; Loom reads at most ${PARSE_LIMITS.jsonDepth}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ExtractionError("the file is not valid JSON");
  }
  const budget = new TextBudget("JSON");
  const lines: string[] = [];
  const emit = (path: string, leaf: unknown): void => {
    const line = `${path || "value"}: ${String(leaf)}`;
    budget.spend(line.length + 1);
    lines.push(line);
  };
  // An explicit stack of containers being walked (children visited lazily, in order) rather
  // than recursion: depth is bounded above, and a flat array of millions costs no extra memory.
  const open = (node: unknown, path: string): Frame | undefined => {
    if (Array.isArray(node)) return { children: node, array: true, next: 0, path };
    if (node && typeof node === "object") return { children: Object.entries(node), array: false, next: 0, path };
    emit(path, node);
    return undefined;
  };
  const root = open(value, "");
  const stack: Frame[] = root ? [root] : [];
  while (stack.length > 0 && lines.length <= MAX_JSON_LINES) {
    const frame = stack[stack.length - 1];
    if (frame.next >= frame.children.length) {
      stack.pop();
      continue;
    }
    const i = frame.next++;
    const [path, child] = frame.array
      ? [`${frame.path}[${i}]`, frame.children[i]]
      : childOf(frame.path, frame.children[i] as [string, unknown]);
    const inner = open(child, path);
    if (inner) stack.push(inner);
  }
  return lines.join("\n");
}
