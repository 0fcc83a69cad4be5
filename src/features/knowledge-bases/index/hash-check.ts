import type { ContentHashes } from "./content-hashes";
import type { DocumentJob, IngestResult } from "./knowledge-base-index";

/**
 * A small document's answer from the index object: how its indexing ended, or, for a caller that
 * left de-duplication to the object (SmallDocumentWriter.ingest with `check`), why its call was
 * sent back unwritten: `known` (an identical document is held: its id), `retry` (another document
 * of the call was known; send this one again) or `unchecked` (the object cannot vouch for its
 * hashes: ask D1).
 */
export type DocumentAnswer =
  | IngestResult
  | { status: "known"; documentId: string }
  | { status: "retry" }
  | { status: "unchecked" };

interface Checked {
  job: DocumentJob;
  call: object;
  check: boolean;
}

/**
 * The batch's de-duplication, in arrival order: a checking call with a document whose content
 * hash is held already, or was taken earlier in this batch, is sent back whole. `fromBatch` names
 * the answers that point at a document of this batch, which hold only if that one ends ready.
 */
export function checkHashes(
  entries: Checked[],
  hashes: Pick<ContentHashes, "complete" | "documentWith">,
): { answers: (DocumentAnswer | undefined)[]; fromBatch: Map<number, string> } {
  const answers: (DocumentAnswer | undefined)[] = entries.map(() => undefined);
  const fromBatch = new Map<number, string>();
  if (!entries.some((e) => e.check)) return { answers, fromBatch };
  const complete = hashes.complete();
  const taken = new Map<string, string>();
  const calls = new Map<object, number[]>();
  entries.forEach((e, i) => calls.set(e.call, [...(calls.get(e.call) ?? []), i]));
  for (const members of calls.values()) {
    const check = entries[members[0]].check;
    if (check && !complete) {
      for (const i of members) answers[i] = { status: "unchecked" };
      continue;
    }
    if (check) {
      let known = false;
      for (const i of members) {
        const hash = entries[i].job.row.contentHash;
        const inBatch = taken.get(hash);
        const id = inBatch ?? hashes.documentWith(hash);
        if (id === undefined) continue;
        answers[i] = { status: "known", documentId: id };
        if (inBatch !== undefined) fromBatch.set(i, inBatch);
        known = true;
      }
      if (known) {
        for (const i of members) answers[i] ??= { status: "retry" };
        continue;
      }
    }
    for (const i of members)
      if (!taken.has(entries[i].job.row.contentHash))
        taken.set(entries[i].job.row.contentHash, entries[i].job.documentId);
  }
  return { answers, fromBatch };
}

/** A sent-back answer once the batch is written: one pointing at a document of the batch that did not end ready becomes `retry`. */
export function settleAnswer(
  answer: DocumentAnswer,
  pointsAt: string | undefined,
  results: Map<string, IngestResult>,
): DocumentAnswer {
  if (pointsAt === undefined) return answer;
  return results.get(pointsAt)?.status === "ready" ? answer : { status: "retry" };
}
