/**
 * Builders for hostile files, made in the test itself: DEFLATE data that repeats one byte a
 * given number of times (fixed Huffman codes: 13 bits per 258 bytes, so 160 MiB take ~1 MB),
 * zip archives whose headers declare whatever size we like, and PDFs with FlateDecode streams.
 */

class BitWriter {
  private bytes: Uint8Array;
  private length = 0;
  private bit = 0;

  constructor(capacity: number) {
    this.bytes = new Uint8Array(capacity);
  }

  /** Writes `count` bits of `value`, least significant first (DEFLATE's header and extra bits). */
  bits(value: number, count: number): void {
    for (let i = 0; i < count; i++) this.put((value >> i) & 1);
  }

  /** Writes a Huffman code, most significant bit first. */
  code(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) this.put((value >> i) & 1);
  }

  private put(b: number): void {
    if (this.bit === 0) this.length++;
    this.bytes[this.length - 1] |= b << this.bit;
    this.bit = (this.bit + 1) & 7;
  }

  done(): Uint8Array {
    return this.bytes.slice(0, this.length);
  }
}

/**
 * Raw DEFLATE: `prefix` as literals, then its last byte repeated `repeat` times (rounded down to
 * whole copies of 258), in one fixed-Huffman block. Inflated size: prefix.length + 258 * copies.
 */
export function deflateRepeating(prefix: Uint8Array, repeat: number): { data: Uint8Array; size: number } {
  const copies = Math.floor(repeat / 258);
  const out = new BitWriter(prefix.length * 2 + Math.ceil((copies * 13) / 8) + 16);
  out.bits(1, 1); // BFINAL
  out.bits(1, 2); // fixed Huffman codes
  for (const byte of prefix) {
    if (byte < 144) out.code(0x30 + byte, 8);
    else out.code(0x190 + byte - 144, 9);
  }
  for (let i = 0; i < copies; i++) {
    out.code(0xc5, 8); // length 258 (symbol 285)
    out.code(0, 5); // distance 1
  }
  out.code(0, 7); // end of block
  return { data: out.done(), size: prefix.length + copies * 258 };
}

/** zlib framing (as PDF's FlateDecode wants) around deflateRepeating, with a correct Adler-32. */
export function zlibRepeating(prefix: Uint8Array, repeat: number): Uint8Array {
  const { data, size } = deflateRepeating(prefix, repeat);
  const mod = 65521n;
  let a = 1n;
  let b = 0n;
  for (const byte of prefix) {
    a = (a + BigInt(byte)) % mod;
    b = (b + a) % mod;
  }
  // The repeated byte m times: a grows by c each step, b by each successive a.
  const m = BigInt(size - prefix.length);
  const c = BigInt(prefix[prefix.length - 1]);
  b = (b + m * a + (c * m * (m + 1n)) / 2n) % mod;
  a = (a + m * c) % mod;
  const adler = Number((b << 16n) | a);
  const out = new Uint8Array(data.length + 6);
  out.set([0x78, 0x01]);
  out.set(data, 2);
  new DataView(out.buffer).setUint32(out.length - 4, adler);
  return out;
}

export interface ZipEntrySpec {
  name: string;
  /** Stored as given: raw DEFLATE when method is 8. */
  data: Uint8Array;
  method: 0 | 8;
  /** The uncompressed size the headers claim. */
  declaredSize: number;
}

/** A zip archive with the given entries; CRCs are left 0 (Loom's reader does not check them). */
export function makeZip(entries: ZipEntrySpec[]): Uint8Array {
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = encoder.encode(entry.name);
    const local = new Uint8Array(30 + name.length);
    const l = new DataView(local.buffer);
    l.setUint32(0, 0x04034b50, true);
    l.setUint16(4, 20, true);
    l.setUint16(8, entry.method, true);
    l.setUint32(18, entry.data.length, true);
    l.setUint32(22, entry.declaredSize, true);
    l.setUint16(26, name.length, true);
    local.set(name, 30);
    const record = new Uint8Array(46 + name.length);
    const c = new DataView(record.buffer);
    c.setUint32(0, 0x02014b50, true);
    c.setUint16(4, 20, true);
    c.setUint16(6, 20, true);
    c.setUint16(10, entry.method, true);
    c.setUint32(20, entry.data.length, true);
    c.setUint32(24, entry.declaredSize, true);
    c.setUint16(28, name.length, true);
    c.setUint32(42, offset, true);
    record.set(name, 46);
    parts.push(local, entry.data);
    central.push(record);
    offset += local.length + entry.data.length;
  }
  const centralSize = central.reduce((n, r) => n + r.length, 0);
  const end = new Uint8Array(22);
  const e = new DataView(end.buffer);
  e.setUint32(0, 0x06054b50, true);
  e.setUint16(8, Math.min(entries.length, 0xffff), true);
  e.setUint16(10, Math.min(entries.length, 0xffff), true);
  e.setUint32(12, centralSize, true);
  e.setUint32(16, offset, true);
  return concat([...parts, ...central, end]);
}

export const DOCX_PREFIX =
  '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>';

/** A DOCX whose word/document.xml inflates to about `inflated` bytes while its headers claim `declared`. */
export function docxBomb(inflated: number, declared: number): Uint8Array {
  const { data } = deflateRepeating(new TextEncoder().encode(`${DOCX_PREFIX}Boom `), inflated);
  const types = new TextEncoder().encode(
    '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
  );
  return makeZip([
    { name: "[Content_Types].xml", data: types, method: 0, declaredSize: types.length },
    { name: "word/document.xml", data, method: 8, declaredSize: declared },
  ]);
}

/**
 * A PDF of `pages` pages that all draw the same content stream: some text, then `inflated`
 * spaces, FlateDecode-compressed. pdf.js decodes the stream again for every page.
 */
export function pdfWithFlateStream(inflated: number, pages = 1): Uint8Array {
  const stream = zlibRepeating(
    new TextEncoder().encode("BT /F1 12 Tf 72 720 Td (Decompression bomb) Tj ET "),
    inflated,
  );
  const pageIds = Array.from({ length: pages }, (_, i) => 5 + i);
  const objects: (string | Uint8Array[])[] = [];
  objects[1] = "<< /Type /Catalog /Pages 2 0 R >>";
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(" ")}] /Count ${pages} >>`;
  objects[3] = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";
  const encoder = new TextEncoder();
  objects[4] = [
    encoder.encode(`<< /Length ${stream.length} /Filter /FlateDecode >>\nstream\n`),
    stream,
    encoder.encode("\nendstream"),
  ];
  for (const id of pageIds)
    objects[id] =
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> >> >>`;
  const parts: Uint8Array[] = [encoder.encode("%PDF-1.4\n")];
  let length = parts[0].length;
  const offsets: number[] = [];
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = length;
    const body = objects[id];
    const chunk = [
      encoder.encode(`${id} 0 obj\n`),
      ...(typeof body === "string" ? [encoder.encode(body)] : body),
      encoder.encode("\nendobj\n"),
    ];
    for (const c of chunk) {
      parts.push(c);
      length += c.length;
    }
  }
  let xref = `xref\n0 ${objects.length}\n0000000000 65535 f \n`;
  for (let id = 1; id < objects.length; id++) xref += `${String(offsets[id]).padStart(10, "0")} 00000 n \n`;
  xref += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`;
  parts.push(encoder.encode(xref));
  return concat(parts);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
