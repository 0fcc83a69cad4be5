/**
 * Templates refer to upstream outputs as `{{node_id}}` (the node's main output) or
 * `{{node_id.output_name}}`. Rendering is plain substitution: no expressions, no code.
 */

export interface TemplateRef {
  node: string;
  output?: string;
  /** The text as written, for error messages. */
  raw: string;
}

const REF = /\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z0-9_-]+))?\s*\}\}/g;
const WHOLE_REF = /^\s*\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z0-9_-]+))?\s*\}\}\s*$/;

/**
 * Every `{{...}}` span of a text: from `{{` to the first `}` after it, when that `}` starts `}}`.
 * One scan with indexOf: the regex /\{\{([^}]*)\}\}/g found the same spans, but retried from
 * every `{` of a text full of them, which took seconds on a 32 KiB template.
 */
function braceSpans(text: string): string[] {
  const spans: string[] = [];
  let from = 0;
  for (;;) {
    const open = text.indexOf("{{", from);
    if (open === -1) break;
    const close = text.indexOf("}", open + 2);
    if (close === -1) break;
    // Every opening before `close` meets the same `}` first, so none of them can match either.
    if (text[close + 1] === "}") spans.push(text.slice(open, close + 2));
    from = text[close + 1] === "}" ? close + 2 : close + 1;
  }
  return spans;
}

/** Every `{{...}}` in a text; a malformed one comes back with `node` empty so validation can name it. */
export function templateRefs(text: string): TemplateRef[] {
  const refs: TemplateRef[] = [];
  for (const whole of braceSpans(text)) {
    const parsed = new RegExp(REF.source).exec(whole);
    if (parsed && parsed[0] === whole) refs.push({ node: parsed[1], output: parsed[2], raw: whole });
    else refs.push({ node: "", raw: whole });
  }
  return refs;
}

/** Looks up one reference's value; `undefined` when the node produced nothing (it was skipped). */
export type RefResolver = (node: string, output: string | undefined) => unknown;

export function stringifyValue(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

/** Renders a template to text. */
export function renderTemplate(text: string, resolve: RefResolver): string {
  return text.replace(new RegExp(REF.source, "g"), (_whole, node: string, output: string | undefined) =>
    stringifyValue(resolve(node, output)),
  );
}

/**
 * Renders a value that may be a template: a string that is exactly one reference keeps the
 * referenced value's type (a number stays a number); other strings render to text; other JSON
 * values pass through unchanged.
 */
export function renderValue(value: unknown, resolve: RefResolver): unknown {
  if (typeof value !== "string") return value;
  const whole = WHOLE_REF.exec(value);
  if (whole) return resolve(whole[1], whole[2]);
  return renderTemplate(value, resolve);
}

/** Every string inside a JSON value, so references nested in objects are validated too. */
export function stringsIn(value: unknown, out: string[] = []): string[] {
  if (typeof value === "string") out.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsIn(item, out);
  else if (value && typeof value === "object") for (const item of Object.values(value)) stringsIn(item, out);
  return out;
}
