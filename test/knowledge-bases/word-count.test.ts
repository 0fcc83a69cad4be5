import { describe, expect, it } from "vitest";
import { wordCount } from "../../src/features/knowledge-bases/index/chunk-lengths";

// The character scan must count exactly what the Unicode-class regular expression it replaced
// counts (BM25's length normalisation reads these counts beside FTS5's).
const byRegex = (text: string): number => [...text.matchAll(/[\p{L}\p{N}]+/gu)].length;

describe("wordCount", () => {
  it("counts runs of letters and digits as the Unicode classes do, ASCII or not", () => {
    for (const text of [
      "",
      "a",
      "  Lift, drag and   moment (M=2.5) at 10deg; x_1-y_2  ",
      "héllo wörld naïve café",
      "日本語のテキスト 123",
      "a\u0301b combining mark",
      "x\u{1F680}y rocket between letters",
      "\u{1D7D8}\u{1D7D9} mathematical digits, \u{10400}\u{10401} Deseret letters",
      "\ud800 a lone surrogate \udc00",
      "٣٤ Arabic-Indic digits, Ⅻ Roman numeral, ½ vulgar fraction",
    ])
      expect(wordCount(text), JSON.stringify(text)).toBe(byRegex(text));
  });
});
