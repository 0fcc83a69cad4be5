/**
 * A quick upper estimate of the size of the program RE2 compiles a pattern to, read from the
 * text without compiling it. Compiling costs time in proportion to (and more than) the program
 * size, and counted repetition multiplies it (`a{1000}` seven times is seven thousand
 * instructions and takes most of a second to compile), so patterns are measured first and
 * compiled only when small enough.
 */

/** Length of the escape sequence starting at `i` (a backslash). */
function escapeLength(text: string, i: number): number {
  const next = text[i + 1];
  // \u{...}, \p{...}, \P{...}, \x{...}: up to the closing brace.
  if ((next === "u" || next === "p" || next === "P" || next === "x") && text[i + 2] === "{") {
    const close = text.indexOf("}", i + 3);
    return close === -1 ? 2 : close - i + 1;
  }
  return 2;
}

/** Index just past the character class starting at `i` (a `[`). */
function classEnd(text: string, i: number): number {
  let j = i + 1;
  if (text[j] === "^") j++;
  if (text[j] === "]") j++;
  while (j < text.length && text[j] !== "]") j += text[j] === "\\" ? escapeLength(text, j) : 1;
  return j + 1;
}

/** Index just past a group opening at `i` (`(`, `(?:`, `(?<name>`, `(?P<name>`, `(?i)`...). */
function groupStart(text: string, i: number): number {
  if (text[i + 1] !== "?") return i + 1;
  if (text[i + 2] === "<" || text[i + 2] === "P") {
    const close = text.indexOf(">", i + 2);
    return close === -1 ? i + 3 : close + 1;
  }
  return i + 3;
}

const COUNTED = /^\{(\d{1,6})(,(\d{0,6}))?\}/;

export function estimatedProgramSize(text: string): number {
  // Per open group: instructions so far, and the size of the last atom (what a quantifier repeats).
  const frames = [{ total: 0, last: 0 }];
  const top = () => frames[frames.length - 1];
  const atom = (size: number) => {
    top().total += size;
    top().last = size;
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\") {
      i += escapeLength(text, i);
      atom(1);
    } else if (c === "[") {
      i = classEnd(text, i);
      atom(1);
    } else if (c === "(") {
      i = groupStart(text, i);
      frames.push({ total: 0, last: 0 });
    } else if (c === ")") {
      const group = frames.length > 1 ? (frames.pop() as { total: number }) : { total: 0 };
      i += 1;
      atom(group.total + 2);
    } else if (c === "{" && COUNTED.test(text.slice(i, i + 16))) {
      const [whole, min, comma, max] = COUNTED.exec(text.slice(i, i + 16)) as RegExpExecArray;
      const count = comma === undefined ? Number(min) : max ? Number(max) : Number(min) + 1;
      const repeated = top().last;
      top().total += repeated * Math.max(count - 1, 0) + count;
      top().last = repeated * count;
      i += whole.length;
    } else if (c === "|" || c === "*" || c === "+" || c === "?") {
      top().total += 2;
      if (c === "|") top().last = 0;
      i += 1;
    } else {
      atom(1);
      i += 1;
    }
  }
  // Unclosed groups are a syntax error the compiler reports; count what they hold.
  return frames.reduce((sum, frame) => sum + frame.total, 0) + 4;
}
