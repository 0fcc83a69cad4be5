import type { Env } from "../../../env";
import type { KbDocumentRow } from "../../../db/schema/knowledge-bases";
import { maxChunksPerKnowledgeBase } from "../../../lib/config";
import { resolveEmbedder } from "../embedders";
import { vectorIndexFor } from "../vector-backend";
import { recordDocuments, type IndexingOutcome, type StatementSpec } from "../documents.repository";
import type { VectorMetadata } from "./vector-index";
import { IngestBatcher } from "./ingest-batcher";
import type { DocumentJob, IngestJob, IngestResult } from "./knowledge-base-index";
import { STEP_CHUNKS } from "./index-limits";

/** When an accepted small document's batch did not commit (the object restarted), the alarm finishes it this much later. */
const RESUME_AFTER_MS = 30_000;
/** Outcomes reported to D1 per write; more wait for the next write or the alarm. */
const REPORT_ROWS = 500;

export interface ItemInput {
  id: string;
  documentId: string | null;
  position: number;
  text: string | null;
  metadata: VectorMetadata;
  values?: ArrayLike<number>;
}

/** What the writer uses of its knowledge base's index object. */
export interface WriterHost {
  sql: SqlStorage;
  storage: DurableObjectStorage;
  env: Env;
  upsertItems(items: ItemInput[]): number[];
  queueChunks(job: IngestJob, reset: boolean): void;
}

/**
 * The index object's path for small documents (issue 14): concurrent requests' documents are
 * written together, and their D1 rows recorded by the object once they are searchable. Tables:
 * `pending` (the object's queue), `finished` (a document's D1 row, with its outcome once known)
 * and `pending_audits` (the request's audit entry, beside its first document).
 */
export class SmallDocumentWriter {
  /** Concurrent requests' small documents, written one batch (one transaction) at a time. */
  private readonly batcher = new IngestBatcher<DocumentJob, IngestResult>(
    (jobs) => this.writeDocuments(jobs),
    (job) => job.chunks.length,
    STEP_CHUNKS,
  );

  constructor(private readonly host: WriterHost) {}

  /**
   * Indexes whole documents of at most STEP_CHUNKS chunks each and writes their D1 rows (with how
   * they ended) and the request's audit entry. Their chunks are queued in SQLite first (a restart
   * before their batch commits leaves them to the alarm), then written with every other request's
   * documents waiting at that moment: one embedding call, one transaction and one D1 batch for all.
   * The D1 rows wait in `finished`, committed with the chunks, until D1 has them, so a document
   * is never searchable without its row for longer than the alarm's retry.
   */
  async ingest(jobs: DocumentJob[], audit?: StatementSpec, heldElsewhere = 0): Promise<IngestResult[]> {
    const limit = maxChunksPerKnowledgeBase(this.host.env);
    // heldElsewhere: what the knowledge base's other shards hold (shard-map.ts), since the limit is the whole base's.
    let held =
      heldElsewhere +
      this.host.sql
        .exec<{ n: number }>("SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending) AS n")
        .one().n;
    const outcomes: (IngestResult | undefined)[] = jobs.map((job) => {
      if (job.chunks.length > STEP_CHUNKS)
        return {
          status: "failed",
          error: `indexing failed: a document sent whole holds at most ${STEP_CHUNKS} chunks`,
        };
      if (held + job.chunks.length > limit)
        return {
          status: "failed",
          error: `the knowledge base holds ${held} chunk${held === 1 ? "" : "s"} and this document gives ${job.chunks.length}; the limit is ${limit} chunks per knowledge base (KB_MAX_CHUNKS)`,
        };
      held += job.chunks.length;
      return undefined;
    });
    const accepted = jobs.filter((_, i) => outcomes[i] === undefined);
    this.host.storage.transactionSync(() => {
      for (const job of accepted) {
        this.host.queueChunks(job, true);
        // Its row waits beside its chunks (outcome still null), so the alarm can finish both after a restart.
        this.host.sql.exec(
          "INSERT OR REPLACE INTO finished (document_id, outcome, row) VALUES (?, NULL, ?)",
          job.documentId,
          JSON.stringify(job.row),
        );
      }
      jobs.forEach((job, i) => {
        const refused = outcomes[i];
        if (refused) this.finish(job, refused);
      });
      // The audit entry travels with the request's first document (written, or refused).
      if (audit && jobs[0])
        this.host.sql.exec(
          "INSERT OR REPLACE INTO pending_audits (document_id, audit) VALUES (?, ?)",
          jobs[0].documentId,
          JSON.stringify(audit),
        );
    });
    if (accepted.length > 0 && (await this.host.storage.getAlarm()) === null)
      await this.host.storage.setAlarm(Date.now() + RESUME_AFTER_MS);
    const written = accepted.length > 0 ? await this.batcher.submit(accepted) : [];
    if (accepted.length < jobs.length) await this.reportFinished();
    let at = 0;
    return outcomes.map((o) => o ?? written[at++]);
  }

  /** One batch: embeds every chunk, commits them with their D1 rows in one transaction, then writes those rows to D1. */
  private async writeDocuments(jobs: DocumentJob[]): Promise<IngestResult[]> {
    let results: IngestResult[];
    try {
      const chunks = jobs.flatMap((job) => job.chunks);
      const vectors: ArrayLike<number>[] = [];
      // A knowledge base has one embedding model; grouping only guards against a mixed batch.
      for (const model of new Set(jobs.map((j) => j.embeddingModel))) {
        const own = jobs.filter((j) => j.embeddingModel === model).flatMap((j) => j.chunks);
        const embedded = await (await resolveEmbedder(this.host.env, model)).embed(own.map((c) => c.text));
        const at = new Map(own.map((c, i) => [c, i]));
        chunks.forEach((c, i) => {
          const k = at.get(c);
          if (k !== undefined) vectors[i] = embedded[k];
        });
      }
      const backend = vectorIndexFor(this.host.env, jobs[0].kbId);
      results = jobs.map((job) => ({ status: "ready", chunks: job.chunks.length }));
      this.host.storage.transactionSync(() => {
        this.host.upsertItems(
          chunks.map((c, i) => ({
            id: c.id,
            documentId: c.documentId,
            position: c.position,
            text: c.text,
            metadata: c.metadata,
            values: backend ? undefined : vectors[i],
          })),
        );
        jobs.forEach((job, i) => this.finish(job, results[i]));
      });
      if (backend)
        await backend.upsert(
          chunks.map((c, i) => ({ id: c.id, values: Array.from(vectors[i]), metadata: c.metadata })),
        );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      results = jobs.map(() => ({ status: "failed", error: `indexing failed: ${message}` }));
      this.host.storage.transactionSync(() => jobs.forEach((job, i) => this.finish(job, results[i])));
    }
    await this.reportFinished();
    return results;
  }

  /** Inside a transaction: the document leaves the queue and its D1 row, with how it ended, waits to be written. */
  private finish(job: DocumentJob, outcome: IngestResult): void {
    this.host.sql.exec("DELETE FROM pending WHERE document_id = ?", job.documentId);
    this.host.sql.exec(
      "INSERT OR REPLACE INTO finished (document_id, outcome, row) VALUES (?, ?, ?)",
      job.documentId,
      JSON.stringify(outcome),
      JSON.stringify(job.row),
    );
  }

  /** Writes finished documents' rows and their requests' audit entries to D1 in one batch; what fails stays for the alarm. */
  async reportFinished(): Promise<void> {
    const rows = this.host.sql
      .exec<{ document_id: string; outcome: string; row: string; audit: string | null }>(
        "SELECT f.document_id, f.outcome, f.row, a.audit FROM finished f LEFT JOIN pending_audits a USING (document_id) WHERE f.outcome IS NOT NULL LIMIT ?",
        REPORT_ROWS,
      )
      .toArray();
    if (rows.length === 0) return;
    try {
      const audits = rows.flatMap((r) => (r.audit ? [JSON.parse(r.audit) as StatementSpec] : []));
      await recordDocuments(
        this.host.env,
        rows.map((r) => ({
          row: JSON.parse(r.row) as KbDocumentRow,
          outcome: JSON.parse(r.outcome) as IndexingOutcome,
        })),
        audits,
      );
    } catch (error) {
      console.error("recording indexed documents in D1 failed; the alarm retries", error);
      await this.host.storage.setAlarm(Date.now() + RESUME_AFTER_MS);
      return;
    }
    this.host.storage.transactionSync(() => {
      for (const r of rows) {
        this.host.sql.exec("DELETE FROM finished WHERE document_id = ? AND outcome = ?", r.document_id, r.outcome);
        this.host.sql.exec("DELETE FROM pending_audits WHERE document_id = ?", r.document_id);
      }
    });
  }
}
