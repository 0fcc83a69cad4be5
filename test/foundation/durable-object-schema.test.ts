import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { applyMigrations } from "../../src/durable-objects/sqlite-schema";
import { KNOWLEDGE_BASE_INDEX_SCHEMA } from "../../src/features/knowledge-bases/index/knowledge-base-index.schema";
import { PIPELINE_RUN_SCHEMA } from "../../src/durable-objects/pipeline-run-object.schema";

const version = (state: DurableObjectState) =>
  state.storage.sql.exec<{ version: number }>("SELECT version FROM schema_version").one().version;

describe("Durable Object schemas: versioned migrations", () => {
  it("a new object starts at the latest version, and one made before versioning is adopted without losing rows", async () => {
    const stub = env.KB_INDEX.get(env.KB_INDEX.idFromName(`schema-${crypto.randomUUID()}`));
    expect(await stub.stats()).toMatchObject({ chunks: 0 });
    await runInDurableObject(stub, (_instance, state) => {
      expect(version(state)).toBe(KNOWLEDGE_BASE_INDEX_SCHEMA.length);
      state.storage.sql.exec("INSERT INTO items (id, text, tokens) VALUES ('kept', 'a chunk', 2)");
      // As storage written before versioning looks: every table, no version row.
      state.storage.sql.exec("DROP TABLE schema_version");
      applyMigrations(state.storage, KNOWLEDGE_BASE_INDEX_SCHEMA);
      expect(version(state)).toBe(KNOWLEDGE_BASE_INDEX_SCHEMA.length);
      expect(state.storage.sql.exec<{ id: string }>("SELECT id FROM items").toArray()).toEqual([{ id: "kept" }]);
    });
  });

  it("refuses storage written by a newer schema than the code knows, and leaves it untouched", async () => {
    const stub = env.PIPELINE_RUNS.get(env.PIPELINE_RUNS.idFromName(`schema-${crypto.randomUUID()}`));
    expect(await stub.status()).toBeNull();
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE schema_version SET version = ?", PIPELINE_RUN_SCHEMA.length + 1);
      expect(() => applyMigrations(state.storage, PIPELINE_RUN_SCHEMA)).toThrow(/newer than this code/);
      expect(version(state)).toBe(PIPELINE_RUN_SCHEMA.length + 1);
    });
  });
});
