import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";

type Json = Record<string, unknown>;
const read = async (response: Response): Promise<[number, Json]> => [response.status, (await response.json()) as Json];

describe("Group A: unknown body fields answer as before, plus a warning each", () => {
  it("a typo in a create body is named, and the knowledge base is still created with the default", async () => {
    const org = await seedOrg();
    const [status, body] = await read(
      await call("/v1/knowledge-base", json({ name: "typo", chunksize: 100 }, bearer(org.owner.apiKey))),
    );
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: "success", warnings: ["unknown field chunksize ignored"] });
    expect(typeof body.id).toBe("string");
  });

  it("nested typos and a field at the wrong level are named with their dotted path, in JSON and in form bodies", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const { id } = (await (await call("/v1/knowledge-base", json({ name: "nested" }, bearer(key)))).json()) as {
      id: string;
    };
    const query = {
      query: "anything",
      config: { scor_cutoff: 0.5, retrieval_config: { search_mod: "keyword" } },
      hybrid_search_config: { alpha: 0.2 },
    };
    const [status, body] = await read(await call(`/v1/knowledge-base/${id}/query`, json(query, bearer(key))));
    expect(status).toBe(200);
    expect(body.warnings).toEqual([
      "unknown field config.retrieval_config.search_mod ignored",
      "unknown field config.scor_cutoff ignored",
      "unknown field hybrid_search_config ignored",
    ]);
    const [formStatus, formBody] = await read(
      await call(
        `/v1/knowledge-base/${id}/query`,
        form({ query: "anything", "config.scor_cutoff": "0.5" }, bearer(key)),
      ),
    );
    expect(formStatus).toBe(200);
    expect(formBody.warnings).toEqual(["unknown field config.scor_cutoff ignored"]);
  });

  it("typos inside search_metadata, an index config and url_data answer as before, with a warning each", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const { id } = (await (await call("/v1/knowledge-base", json({ name: "meta" }, bearer(key)))).json()) as {
      id: string;
    };
    const [status, body] = await read(
      await call(
        `/v1/knowledge-base/${id}/query`,
        json({ query: "anything", search_metadata: { top_k: 3, scor_cutoff: 0.5 } }, bearer(key)),
      ),
    );
    expect(status).toBe(200);
    expect(body.warnings).toEqual(["unknown field search_metadata.scor_cutoff ignored"]);
    const file = {
      file: { type: "file", raw_bytes: btoa("Some text."), metadata: { name: "a.txt", mime_type: "text/plain" } },
    };
    const [indexStatus, indexed] = await read(
      await call(`/v1/knowledge-base/${id}/index`, json({ file_data: file, config: { chunksize: 50 } }, bearer(key))),
    );
    expect(indexStatus).toBe(200);
    expect(indexed.warnings).toEqual(["unknown field config.chunksize ignored"]);
  });

  it("a body with only declared fields (nulls included, as the SDK sends them) has no warnings; errors are unchanged", async () => {
    const org = await seedOrg();
    const [, body] = await read(
      await call(
        "/v1/knowledge-base",
        json({ name: "clean", description: null, chunk_size: 200 }, bearer(org.owner.apiKey)),
      ),
    );
    expect(body).not.toHaveProperty("warnings");
    const [status, failed] = await read(
      await call("/v1/knowledge-base", json({ chunksize: 100 }, bearer(org.owner.apiKey))),
    );
    expect(status).toBe(400);
    expect(failed).not.toHaveProperty("warnings");
  });
});
