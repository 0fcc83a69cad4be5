/**
 * What a batch's flush gives back once its own work is done: `answer`, the results, may settle
 * later (after a write outside the object, which the next batch waits for: see IngestBatcher).
 */
export interface Flushed<R> {
  answer: Promise<R[]>;
}

/**
 * Coalesces concurrent calls into batches inside one Durable Object (group commit): while a batch
 * is being written, the calls that arrive wait in the queue and are written together by the next
 * one, each caller awaiting only its own results. One object serves one knowledge base, so a batch
 * never mixes tenants; `maxWeight` caps a batch so a burst of large calls cannot make a small one
 * wait behind more than one batch's worth of work.
 *
 * The next batch starts once the previous batch's answer has settled (its D1 write done), not as
 * soon as its transaction is: a batch's fixed costs (its commit, its D1 call, the packed-vector
 * tail it rewrites, a new FTS5 segment) are then shared by every call that arrived during that
 * write. Starting at once gave one-document batches with 8 single-document requests in flight
 * (each paying all of them); waiting gives ~2 documents a batch and ~8% less server CPU per
 * document (BENCHMARKS.md, "Many small documents", sixth round). Each batch also starts one
 * event-loop turn after it could (a timer of 0 ms, no wall-clock wait), which lets the calls whose
 * messages have already arrived join it: another ~15-20% less CPU per document in that row.
 */
/** Resolves after the event loop's next turn (what has already arrived is delivered first). */
const nextTurn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Longest a batch waits for the callers it expects (group commit's gather window): as many calls
 * as the largest of the last RECENT_BATCHES batches held. With 8 single-document requests in flight
 * the batches then hold ~4-8 documents instead of ~3, each sharing one commit, one D1 write and the
 * statements of one transaction (BENCHMARKS.md, "Many small documents", seventh round). Callers
 * that stopped coming cost at most one window a batch until the expectation has aged out (16
 * batches); requests in sequence expect nobody (batches of one) and never wait. The thread is not
 * idle meanwhile: it runs the expected callers' requests up to their call.
 */
export const GATHER_MS = 3;
/** How many past batches' sizes set the expectation. */
const RECENT_BATCHES = 16;

export class IngestBatcher<J, R> {
  private queue: { jobs: J[]; resolve: (results: R[]) => void; reject: (error: unknown) => void }[] = [];
  private draining = false;
  /** Calls in each of the last RECENT_BATCHES batches; the largest is how many the next one waits for (see GATHER_MS). */
  private readonly recent: number[] = [];
  private expected = 1;
  /** Set while a batch waits for expected callers: submit() ends the wait early once they are here. */
  private gathered: (() => void) | undefined;

  constructor(
    private readonly flush: (jobs: J[]) => Promise<Flushed<R>>,
    private readonly weight: (job: J) => number,
    private readonly maxWeight: number,
    /** The gather window (GATHER_MS; tests pass their own). */
    private readonly gatherMs = GATHER_MS,
  ) {}

  /** Answers the results of these jobs, in order, once the batch holding them is written. */
  submit(jobs: J[]): Promise<R[]> {
    return new Promise<R[]>((resolve, reject) => {
      this.queue.push({ jobs, resolve, reject });
      if (this.gathered && this.queue.length >= this.expected) this.gathered();
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        // One event-loop turn before taking the queue: calls already delivered to the object (their
        // RPC messages waiting behind this turn) join this batch instead of starting the next one.
        await nextTurn();
        if (this.queue.length < this.expected) await this.gather();
        // Whole calls only: a caller's jobs are written in one batch (one transaction).
        const taken: typeof this.queue = [];
        let weight = 0;
        while (this.queue.length > 0) {
          const next = this.queue[0];
          const w = next.jobs.reduce((n, j) => n + this.weight(j), 0);
          if (taken.length > 0 && weight + w > this.maxWeight) break;
          taken.push(next);
          this.queue.shift();
          weight += w;
        }
        this.recent.push(taken.length);
        if (this.recent.length > RECENT_BATCHES) this.recent.shift();
        this.expected = Math.max(...this.recent);
        const settle = (results: R[]): void => {
          let at = 0;
          for (const t of taken) {
            t.resolve(results.slice(at, at + t.jobs.length));
            at += t.jobs.length;
          }
        };
        const fail = (error: unknown): void => {
          for (const t of taken) t.reject(error);
        };
        try {
          const { answer } = await this.flush(taken.flatMap((t) => t.jobs));
          // Waited for before the next batch (see above); the callers are answered as it settles.
          await answer.then(settle, fail);
        } catch (error) {
          fail(error);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /** Waits until the expected callers are queued or the gather window has passed. */
  private gather(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.gathered = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.gatherMs);
      this.gathered = done;
    });
  }
}
