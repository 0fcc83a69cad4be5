import { Inflate } from "fflate";
import { ExtractionError, PARSE_LIMITS } from "./parse-limits";

/**
 * The one way Loom opens a zip-based file (DOCX today; XLSX, PPTX, ODT or any later format must
 * come through here too). It reads the central directory itself and inflates only the entries
 * asked for, counting the bytes really produced: the sizes a header declares are never trusted,
 * so an archive that under-declares a 3 GiB entry stops at the limit like an honest one.
 */

export interface ZipLimits {
  entries: number;
  inflatedBytes: number;
  ratio: number;
  ratioFloorBytes: number;
}

const DEFAULT_LIMITS: ZipLimits = {
  entries: PARSE_LIMITS.zipEntries,
  inflatedBytes: PARSE_LIMITS.zipInflatedBytes,
  ratio: PARSE_LIMITS.zipRatio,
  ratioFloorBytes: PARSE_LIMITS.zipRatioFloorBytes,
};

/** Compressed bytes handed to the inflater at once: one push yields at most ~1032 times this. */
const INFLATE_STEP = 4096;

interface CentralEntry {
  name: string;
  method: number;
  encrypted: boolean;
  compressedSize: number;
  declaredSize: number;
  localOffset: number;
}

const u16 = (b: Uint8Array, at: number): number => b[at] | (b[at + 1] << 8);
const u32 = (b: Uint8Array, at: number): number =>
  (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;
/** A 64-bit little-endian size; anything past 2^53 is past every limit anyway. */
const u64 = (b: Uint8Array, at: number): number => u32(b, at) + u32(b, at + 4) * 2 ** 32;

const FULL = 0xffffffff;

/**
 * Reads the named entries of a zip archive, inflated. `label` names the format in messages
 * ("DOCX"). Throws ExtractionError for a corrupt archive or one past a limit.
 */
export function readZipEntries(
  bytes: Uint8Array,
  label: string,
  wanted: (name: string) => boolean,
  limits: ZipLimits = DEFAULT_LIMITS,
): Map<string, Uint8Array> {
  const corrupt = (): ExtractionError =>
    new ExtractionError(`the ${label} file is corrupt (not a readable zip archive)`);
  const entries = centralDirectory(bytes, label, limits, corrupt);
  const out = new Map<string, Uint8Array>();
  let inflated = 0;
  for (const entry of entries) {
    if (!wanted(entry.name) || out.has(entry.name)) continue;
    if (entry.encrypted)
      throw new ExtractionError(`the ${label} file is encrypted (${entry.name}); Loom reads only unencrypted files`);
    const tooBig = (): ExtractionError =>
      new ExtractionError(
        `the ${label} file inflates past ${limits.inflatedBytes} bytes (${entry.name}); Loom reads at most ${limits.inflatedBytes} bytes from an archive, whatever its headers declare`,
      );
    // Cheap refusal before any work when the header itself admits the size.
    if (inflated + entry.declaredSize > limits.inflatedBytes) throw tooBig();
    const data = entryData(bytes, entry, corrupt);
    const budget = limits.inflatedBytes - inflated;
    let content: Uint8Array;
    if (entry.method === 0) {
      if (data.length > budget) throw tooBig();
      content = data;
    } else if (entry.method === 8) {
      const ratioCap = Math.max(limits.ratioFloorBytes, data.length * limits.ratio);
      const result = inflateCapped(data, Math.min(budget, ratioCap), corrupt);
      if (result === "over") {
        if (ratioCap < budget)
          throw new ExtractionError(
            `the ${label} file's ${entry.name} inflates to more than ${limits.ratio} times its compressed size; Loom reads at most ${limits.ratio}:1`,
          );
        throw tooBig();
      }
      content = result;
    } else {
      throw new ExtractionError(
        `the ${label} file compresses ${entry.name} with method ${entry.method}; Loom reads stored and deflated entries only`,
      );
    }
    inflated += content.length;
    out.set(entry.name, content);
  }
  return out;
}

function centralDirectory(
  bytes: Uint8Array,
  label: string,
  limits: ZipLimits,
  corrupt: () => ExtractionError,
): CentralEntry[] {
  // The end-of-central-directory record sits in the last 22 bytes plus at most a 64 KiB comment.
  let eocd = -1;
  for (let at = bytes.length - 22; at >= Math.max(0, bytes.length - 22 - 0xffff); at--) {
    if (u32(bytes, at) === 0x06054b50) {
      eocd = at;
      break;
    }
  }
  if (eocd < 0) throw corrupt();
  let count = u16(bytes, eocd + 10);
  let size = u32(bytes, eocd + 12);
  let offset = u32(bytes, eocd + 16);
  if (count === 0xffff || size === FULL || offset === FULL) {
    const locator = eocd - 20;
    if (locator < 0 || u32(bytes, locator) !== 0x07064b50) throw corrupt();
    const record = u64(bytes, locator + 8);
    if (record + 56 > bytes.length || u32(bytes, record) !== 0x06064b50) throw corrupt();
    count = u64(bytes, record + 32);
    size = u64(bytes, record + 40);
    offset = u64(bytes, record + 48);
  }
  if (count > limits.entries)
    throw new ExtractionError(
      `the ${label} file's archive lists ${count} entries; Loom reads archives of at most ${limits.entries}`,
    );
  if (offset + size > bytes.length) throw corrupt();
  const entries: CentralEntry[] = [];
  const names = new TextDecoder();
  let at = offset;
  for (let i = 0; i < count; i++) {
    if (at + 46 > offset + size || u32(bytes, at) !== 0x02014b50) throw corrupt();
    const nameLength = u16(bytes, at + 28);
    const extraLength = u16(bytes, at + 30);
    const commentLength = u16(bytes, at + 32);
    const next = at + 46 + nameLength + extraLength + commentLength;
    if (next > offset + size) throw corrupt();
    const entry: CentralEntry = {
      name: names.decode(bytes.subarray(at + 46, at + 46 + nameLength)),
      method: u16(bytes, at + 10),
      encrypted: (u16(bytes, at + 8) & 1) === 1,
      compressedSize: u32(bytes, at + 20),
      declaredSize: u32(bytes, at + 24),
      localOffset: u32(bytes, at + 42),
    };
    readZip64Extra(bytes, at + 46 + nameLength, extraLength, entry);
    entries.push(entry);
    at = next;
  }
  return entries;
}

/** Sizes and offsets too large for 32 bits are in the zip64 extra field, in this order. */
function readZip64Extra(bytes: Uint8Array, start: number, length: number, entry: CentralEntry): void {
  if (entry.declaredSize !== FULL && entry.compressedSize !== FULL && entry.localOffset !== FULL) return;
  for (let at = start; at + 4 <= start + length; ) {
    const id = u16(bytes, at);
    const size = u16(bytes, at + 2);
    if (id === 0x0001) {
      let field = at + 4;
      const take = (): number => {
        const value = field + 8 <= at + 4 + size ? u64(bytes, field) : FULL;
        field += 8;
        return value;
      };
      if (entry.declaredSize === FULL) entry.declaredSize = take();
      if (entry.compressedSize === FULL) entry.compressedSize = take();
      if (entry.localOffset === FULL) entry.localOffset = take();
      return;
    }
    at += 4 + size;
  }
}

function entryData(bytes: Uint8Array, entry: CentralEntry, corrupt: () => ExtractionError): Uint8Array {
  const local = entry.localOffset;
  if (local + 30 > bytes.length || u32(bytes, local) !== 0x04034b50) throw corrupt();
  const start = local + 30 + u16(bytes, local + 26) + u16(bytes, local + 28);
  const end = start + entry.compressedSize;
  if (end > bytes.length) throw corrupt();
  return bytes.subarray(start, end);
}

/**
 * Inflates raw DEFLATE data, stopping as soon as the output passes `cap` bytes (the answer is
 * then "over"). The input goes in small steps so that no single step can produce much more.
 */
export function inflateCapped(data: Uint8Array, cap: number, corrupt: () => ExtractionError): Uint8Array | "over" {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const inflater = new Inflate((chunk) => {
    total += chunk.length;
    if (total <= cap) chunks.push(chunk);
  });
  try {
    for (let at = 0; at < data.length && total <= cap; at += INFLATE_STEP) {
      inflater.push(data.subarray(at, at + INFLATE_STEP), at + INFLATE_STEP >= data.length);
    }
    if (data.length === 0) inflater.push(new Uint8Array(0), true);
  } catch {
    throw corrupt();
  }
  if (total > cap) return "over";
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}
