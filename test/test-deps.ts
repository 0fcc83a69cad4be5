import type { Env } from "../src/env";
import type { Deps } from "../src/deps";

/** Implementations a test file picks, from the env the Worker or object runs with. */
export type DepsChoice = (env: Env) => Partial<Deps>;

/**
 * What the test entry (test/worker.ts) builds the app and the run objects with while a test file
 * runs: production unless the file chose otherwise. The objects are built by the runtime, not by
 * the test, so the choice is held here, in test code, for the next ones built; src/ keeps none.
 */
const chosen: { everywhere: DepsChoice | null; agentRuns: DepsChoice | null } = { everywhere: null, agentRuns: null };

function choose(slot: keyof typeof chosen, choice: DepsChoice): () => void {
  const previous = chosen[slot];
  chosen[slot] = choice;
  return () => {
    chosen[slot] = previous;
  };
}

/** The app (`call()`), pipeline runs and agent runs use these until the returned function is called. */
export const useDeps = (choice: DepsChoice): (() => void) => choose("everywhere", choice);

/** New agent runs use these (and production for the rest) until the returned function is called. */
export const useAgentRunDeps = (choice: DepsChoice): (() => void) => choose("agentRuns", choice);

/** The current choice for the app and pipeline runs (null: production). */
export const everywhereChoice = (): DepsChoice | null => chosen.everywhere;

/** The current choice for agent runs: their own if a file chose one, else the app's. */
export const agentRunChoice = (): DepsChoice | null => chosen.agentRuns ?? chosen.everywhere;
