import type { Env } from "../../env";
import { readFile } from "../../db/files";
import { indexStub } from "./durable-object-vector-index";

/**
 * A document's original file as it was uploaded. Most have an R2 object of their own
 * (`knowledge-bases/<kb>/<document>/original`, the row's r2Key); a small file indexed whole
 * (at most ORIGINAL_IN_INDEX_MAX_BYTES) is kept by its knowledge base's index object beside its
 * chunks instead, and leaves with them. Null when none was kept (web pages, refused files).
 */
export async function readOriginal(
  env: Env,
  kbId: string,
  doc: { id: string; r2Key: string | null },
): Promise<Uint8Array | null> {
  if (doc.r2Key) return readFile(env, doc.r2Key);
  return indexStub(env, kbId).original(doc.id);
}
