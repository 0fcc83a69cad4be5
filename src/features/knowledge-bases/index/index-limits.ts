/**
 * Chunks per ingestion step of a knowledge base's index object: one step (an embedding call and
 * one SQLite transaction) keeps well inside a request's CPU budget. A module of its own so the
 * Worker side and the object's helpers read it without importing the object.
 */
export const STEP_CHUNKS = 1000;
