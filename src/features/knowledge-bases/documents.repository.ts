import { eq } from "drizzle-orm";
import type { Env } from "../../env";
import { database } from "../../db/client";
import { kbDocuments } from "../../db/schema/knowledge-bases";

/** Records how a document's indexing ended (called by the Durable Object's alarm too). */
export async function markDocumentIndexed(env: Env, documentId: string, result: { status: "ready"; chunks: number } | { status: "failed"; error: string }): Promise<void> {
  const now = new Date().toISOString();
  const set = result.status === "ready" ? { status: "ready" as const, error: null, chunkCount: result.chunks, updatedAt: now } : { status: "failed" as const, error: result.error, updatedAt: now };
  await database(env).update(kbDocuments).set(set).where(eq(kbDocuments.id, documentId));
}
