import type { AuthContext, Env } from "../../env";
import type { KnowledgeBaseRow } from "../../db/schema/knowledge-bases";
import { indexStub } from "./durable-object-vector-index";
import { CHUNKS_PER_CALL, type ChunkSettings } from "./ingestion.service";
import { ORIGINAL_IN_INDEX_MAX_BYTES, planFiles, type PreparedFile } from "./file-plan";

/** Times a request sends its files again after the index object named some as held already. */
const CHECK_ROUNDS = 4;
/** Knowledge bases whose index object cannot answer de-duplication, remembered per isolate (bounded). */
const LOOKUP_KEPT = 1_000;

/**
 * Knowledge bases whose index object said it cannot vouch for its content hashes, or that have
 * split. Only a hint that spares their requests a call answered "ask D1": both states last, and a
 * base missing here only costs that call. Nothing about access is kept.
 */
const askD1 = new Set<string>();

function rememberAskD1(kbId: string): void {
  askD1.add(kbId);
  if (askD1.size > LOOKUP_KEPT) askD1.delete(askD1.values().next().value ?? "");
}

/**
 * Indexes the request's files with de-duplication answered by the index object, in the batch
 * that writes them (content-hashes.ts): the request then makes no D1 call of its own for its
 * documents (issue 14). Only for files the object takes whole in one call, with their originals;
 * answers undefined when the object cannot answer (the caller asks D1, as before), having stored
 * nothing. A call sent back names the documents held already: their ids are used and the rest is
 * sent again, at most CHECK_ROUNDS times.
 */
export async function indexCheckedByObject(
  env: Env,
  auth: AuthContext,
  kb: KnowledgeBaseRow,
  files: PreparedFile[],
  settings: ChunkSettings,
  hashes: string[],
): Promise<string[] | undefined> {
  if (askD1.has(kb.id)) return undefined;
  const whole = files.every((f) => f.chunks !== undefined && (f.bytes?.length ?? 0) <= ORIGINAL_IN_INDEX_MAX_BYTES);
  if (!whole || files.reduce((n, f) => n + f.chunkCount, 0) > CHUNKS_PER_CALL) return undefined;
  const known = new Map<string, string>();
  for (let round = 0; round < CHECK_ROUNDS; round++) {
    const plan = planFiles(auth, kb, files, settings, hashes, known);
    if (!plan.audit) return plan.ids;
    if (plan.large.length > 0 || plan.toR2.length > 0) return undefined;
    const answers = await indexStub(env, kb.id).ingestDocumentsChecked(plan.small, plan.audit);
    if (answers === "lookup" || answers.some((a) => a.status === "unchecked")) {
      rememberAskD1(kb.id);
      return undefined;
    }
    if (answers.every((a) => a.status !== "known" && a.status !== "retry")) return plan.ids;
    answers.forEach((a, i) => {
      if (a.status === "known") known.set(plan.small[i].row.contentHash, a.documentId);
    });
  }
  // Sent back every time (identical files arriving concurrently, over and over): D1 decides.
  return undefined;
}
