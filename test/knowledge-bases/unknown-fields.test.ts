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
