import type { Env } from "../../../env";
import type { KbDocumentRow } from "../../../db/schema/knowledge-bases";
import { maxChunksPerKnowledgeBase } from "../../../lib/config";
import { resolveEmbedder } from "../embedders";
import { vectorIndexFor } from "../vector-backend";
import { recordDocuments, type IndexingOutcome, type StatementSpec } from "../documents.repository";
import type { VectorMetadata } from "./vector-index";
import { IngestBatcher, type Flushed } from "./ingest-batcher";
import type { DocumentJob, IngestResult } from "./knowledge-base-index";
import { STEP_CHUNKS } from "./index-limits";
import type { ContentHashes } from "./content-hashes";
import { checkHashes, settleAnswer, type DocumentAnswer } from "./hash-check";

export type { DocumentAnswer } from "./hash-check";

/** When a batch's D1 write fails (or the object restarts before it), the alarm writes its rows this much later. */
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
  hashes: ContentHashes;
  storage: DurableObjectStorage;
  env: Env;
  upsertItems(items: ItemInput[]): number[];
  /** Inside a transaction: keeps small documents' originals beside their chunks. */
  storeOriginals(originals: { documentId: string; bytes: Uint8Array }[]): void;
}

/** A document whose row goes to D1, with how it ended (also as stored in `finished`). */
interface Reported {
  documentId: string;
  row: KbDocumentRow;
  outcome: IngestResult;
  outcomeJson: string;
  audit?: StatementSpec;
}

/** A document of a request, the request's audit entry riding with its first document. */
interface BatchEntry {
  job: DocumentJob;
  audit?: StatementSpec;
  /** The call it came in (a call's documents are answered, or sent back, together). */
  call: object;
  /** Whether its caller left de-duplication to this object (see ingest). */
  check: boolean;
  /** Chunks the knowledge base's other shards held when the request came in. */
  heldElsewhere: number;
}

/**
 * The index object's path for small documents (issue 14): concurrent requests' documents are
 * written together, and their D1 rows recorded by the object once they are searchable. Tables:
 * `finished` (a document's D1 row with its outcome, until D1 has it), `pending_audits` (the
 * request's audit entry, beside its first document) and `originals` (small originals, kept here
 * rather than as one R2 object each: see file-ingestion.ts).
 */
export class SmallDocumentWriter {
  /** Concurrent requests' small documents, written one batch (one transaction) at a time. */
  private readonly batcher = new IngestBatcher<BatchEntry, DocumentAnswer>(
    (entries) => this.writeDocuments(entries),
    (entry) => entry.job.chunks.length,
    STEP_CHUNKS,
  );

  /** Batches' rows waiting for the D1 write in flight, written together by the next one (see reportLater). */
  private reportQueue: { items: Reported[]; done: () => void }[] = [];
  private reporting = false;

  /** Documents D1 has, by id, with their outcome as stored: their `finished` rows wait for tidy(). */
  private readonly reported = new Map<string, string>();

  /** Batches committed by this instance: callers answered by the same batch share the checks that follow it (see KnowledgeBaseIndex). */
  commits = 0;

  constructor(private readonly host: WriterHost) {}

  /**
   * Indexes whole documents of at most STEP_CHUNKS chunks each and writes their D1 rows (with how
   * they ended) and the request's audit entry, together with every other request's documents
   * waiting at that moment: one embedding call, one transaction and one D1 batch for all. Nothing
   * is stored before the batch's transaction, so an object that restarts first fails the request
   * (the caller retries; nothing was kept). The D1 rows wait in `finished`, committed with the
   * chunks, until D1 has them, so a document is never searchable without its row for longer than
   * the alarm's retry.
   *
   * With `check`, the caller did not look for identical documents in D1: this object answers it
   * from its content hashes, in the batch, so nothing can slip in between. A call with a document
   * already held (or written earlier in the same batch) is sent back whole, nothing of it stored:
   * `known` with the existing id for those, `retry` for the others, for the caller to send again
   * without the known ones (its audit entry then names only what is written). `unchecked` when
   * this object cannot vouch for its hashes (content-hashes.ts): the caller asks D1.
   */
  async ingest(
    jobs: DocumentJob[],
    audit?: StatementSpec,
    heldElsewhere = 0,
    check = false,
  ): Promise<DocumentAnswer[]> {
    if (jobs.length === 0) return [];
    // The alarm is the retry for a D1 write that fails after the chunks commit; set before the batch
    // so it is in place whatever happens after.
    if ((await this.host.storage.getAlarm()) === null) await this.host.storage.setAlarm(Date.now() + RESUME_AFTER_MS);
    const call = {};
    return this.batcher.submit(
      jobs.map((job, i) => ({ job, audit: i === 0 ? audit : undefined, heldElsewhere, call, check })),
    );
  }

  /**
   * One batch, in arrival order: refuses what would pass the chunk limit (counted at this moment,
   * batches being written one at a time), embeds the rest, commits their chunks, originals and D1
   * rows in one transaction, then writes those rows to D1.
   */
  private async writeDocuments(all: BatchEntry[]): Promise<Flushed<DocumentAnswer>> {
    // Calls sent back by the de-duplication check take no further part in the batch.
    const { answers, fromBatch } = checkHashes(all, this.host.hashes);
    const entries = all.filter((_, i) => answers[i] === undefined);
    const { answer } = entries.length > 0 ? await this.writeAccepted(entries) : { answer: Promise.resolve([]) };
    return {
      answer: answer.then((results) => {
        const byId = new Map(entries.map((e, i) => [e.job.documentId, results[i]]));
        let at = 0;
        return all.map((_, i) => {
          const sent = answers[i];
          return sent ? settleAnswer(sent, fromBatch.get(i), byId) : results[at++];
        });
      }),
    };
  }

  private async writeAccepted(entries: BatchEntry[]): Promise<Flushed<IngestResult>> {
    const limit = maxChunksPerKnowledgeBase(this.host.env);
    // What the knowledge base's other shards hold (shard-map.ts), since the limit is the whole base's.
    const heldElsewhere = Math.max(0, ...entries.map((e) => e.heldElsewhere));
    let held =
      heldElsewhere +
      this.host.sql
        .exec<{ n: number }>("SELECT (SELECT count(*) FROM items) + (SELECT count(*) FROM pending) AS n")
        .one().n;
    const results: (IngestResult | undefined)[] = entries.map(({ job }) => {
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
    const accepted = entries.filter((_, i) => results[i] === undefined).map((e) => e.job);
    try {
      const vectors = accepted.length > 0 ? await this.embed(accepted) : [];
      const chunks = accepted.flatMap((job) => job.chunks);
      const backend = accepted.length > 0 ? vectorIndexFor(this.host.env, accepted[0].kbId) : null;
      this.host.storage.transactionSync(() => {
        this.dropReported();
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
        // Originals and content hashes go in one statement per table for the batch (not one per document).
        const originals: { documentId: string; bytes: Uint8Array }[] = [];
        const hashes: { documentId: string; hash: string }[] = [];
        entries.forEach(({ job }, i) => {
          results[i] ??= { status: "ready", chunks: job.chunks.length };
          if (results[i].status !== "ready") return;
          if (job.original) originals.push({ documentId: job.documentId, bytes: job.original });
          hashes.push({ documentId: job.documentId, hash: job.row.contentHash });
        });
        this.host.storeOriginals(originals);
        this.host.hashes.addAll(hashes);
        this.record(entries, results as IngestResult[]);
      });
      this.commits += 1;
      this.reported.clear();
      if (backend)
        await backend.upsert(
          chunks.map((c, i) => ({ id: c.id, values: Array.from(vectors[i]), metadata: c.metadata })),
        );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const failed: IngestResult = { status: "failed", error: `indexing failed: ${message}` };
      entries.forEach((_, i) => {
        if (results[i]?.status !== "failed") results[i] = failed;
      });
      this.host.storage.transactionSync(() => this.record(entries, results as IngestResult[]));
    }
    const reported = this.reportLater(
      entries.map(({ job, audit }, i) => ({
        documentId: job.documentId,
        row: job.row,
        outcome: results[i] as IngestResult,
        outcomeJson: JSON.stringify(results[i]),
        audit,
      })),
    );
    return { answer: reported.then(() => results as IngestResult[]) };
  }

  /**
   * Writes these rows to D1 and settles once it has them (or the write failed, left to the alarm).
   * At most one D1 write is in flight; rows that arrive meanwhile go together in the next one. (The
   * batcher now waits for a batch's write before starting the next batch, so that the calls
   * arriving during it share one batch: see IngestBatcher; so this queue now holds one batch at a time.)
   */
  private reportLater(items: Reported[]): Promise<void> {
    return new Promise<void>((done) => {
      this.reportQueue.push({ items, done });
      if (!this.reporting) void this.drainReports();
    });
  }

  private async drainReports(): Promise<void> {
    this.reporting = true;
    try {
      while (this.reportQueue.length > 0) {
        const taken = this.reportQueue.splice(0);
        try {
          await this.report(taken.flatMap((t) => t.items));
        } catch (error) {
          // report() leaves failures to the alarm; its callers are answered whatever happens, as before.
          console.error("recording indexed documents in D1 failed", error);
        } finally {
          for (const t of taken) t.done();
        }
      }
    } finally {
      this.reporting = false;
    }
  }

  /** Every chunk's vector, in the jobs' order (a knowledge base has one model; grouping guards against a mixed batch). */
  private async embed(jobs: DocumentJob[]): Promise<ArrayLike<number>[]> {
    const chunks = jobs.flatMap((job) => job.chunks);
    const vectors: ArrayLike<number>[] = [];
    for (const model of new Set(jobs.map((j) => j.embeddingModel))) {
      const own = jobs.filter((j) => j.embeddingModel === model).flatMap((j) => j.chunks);
      const embedded = await (await resolveEmbedder(this.host.env, model)).embed(own.map((c) => c.text));
      const at = new Map(own.map((c, i) => [c, i]));
      chunks.forEach((c, i) => {
        const k = at.get(c);
        if (k !== undefined) vectors[i] = embedded[k];
      });
    }
    return vectors;
  }

  /** Inside the batch's transaction: each document's D1 row with how it ended, and its request's audit entry, wait for D1. */
  private record(entries: BatchEntry[], results: IngestResult[]): void {
    // One statement per table for the whole batch (json_each), not one per document: the batch's
    // transaction stays a handful of statements however many documents it holds.
    this.host.sql.exec(
      "INSERT OR REPLACE INTO finished (document_id, outcome, row) SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?)",
      JSON.stringify(
        entries.map(({ job }, i) => [job.documentId, JSON.stringify(results[i]), JSON.stringify(job.row)]),
      ),
    );
    const audits = entries.flatMap(({ job, audit }) => (audit ? [[job.documentId, JSON.stringify(audit)]] : []));
    if (audits.length > 0)
      this.host.sql.exec(
        "INSERT OR REPLACE INTO pending_audits (document_id, audit) SELECT value ->> 0, value ->> 1 FROM json_each(?)",
        JSON.stringify(audits),
      );
  }

  /**
   * Writes documents' rows (with how they ended) and their requests' audit entries to D1, in
   * batches of REPORT_ROWS. Their `finished` rows are dropped by the next batch's transaction or
   * the alarm rather than by a write of their own, which would hold the answer until it is
   * committed; a restart before that only makes the alarm write them again (an upsert, and audit
   * entries that ignore their own repeat). On failure they stay for the alarm.
   */
  private async report(items: Reported[]): Promise<boolean> {
    for (let i = 0; i < items.length; i += REPORT_ROWS) {
      const slice = items.slice(i, i + REPORT_ROWS);
      try {
        await recordDocuments(
          this.host.env,
          slice.map((r) => ({ row: r.row, outcome: r.outcome as IndexingOutcome })),
          slice.flatMap((r) => (r.audit ? [r.audit] : [])),
        );
      } catch (error) {
        console.error("recording indexed documents in D1 failed; the alarm retries", error);
        await this.host.storage.setAlarm(Date.now() + RESUME_AFTER_MS);
        return false;
      }
      for (const r of slice) this.reported.set(r.documentId, r.outcomeJson);
    }
    return true;
  }

  /** Inside a transaction: drops the `finished` rows (and audit entries) D1 has; the caller forgets them once committed. */
  private dropReported(): void {
    if (this.reported.size === 0) return;
    const pairs = JSON.stringify([...this.reported]);
    this.host.sql.exec(
      "DELETE FROM finished WHERE (document_id, outcome) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))",
      pairs,
    );
    this.host.sql.exec("DELETE FROM pending_audits WHERE document_id IN (SELECT value ->> 0 FROM json_each(?))", pairs);
  }

  private tidy(): void {
    if (this.reported.size === 0) return;
    this.host.storage.transactionSync(() => this.dropReported());
    this.reported.clear();
  }

  /** The alarm's: writes to D1 what earlier writes could not (or a restart left), then drops what D1 has. */
  async reportFinished(): Promise<void> {
    this.tidy();
    const rows = this.host.sql
      .exec<{ document_id: string; outcome: string; row: string; audit: string | null }>(
        "SELECT f.document_id, f.outcome, f.row, a.audit FROM finished f LEFT JOIN pending_audits a USING (document_id) WHERE f.outcome IS NOT NULL LIMIT ?",
        REPORT_ROWS,
      )
      .toArray();
    if (rows.length === 0) return;
    const items = rows.map((r) => ({
      documentId: r.document_id,
      row: JSON.parse(r.row) as KbDocumentRow,
      outcome: JSON.parse(r.outcome) as IngestResult,
      outcomeJson: r.outcome,
      audit: r.audit ? (JSON.parse(r.audit) as StatementSpec) : undefined,
    }));
    if (await this.report(items)) this.tidy();
  }
}
