import { describe, expect, it } from "vitest";
import { call, seedOrg } from "../helpers";
import { createPipeline, send, SMALLEST, WITH_APPROVAL } from "./fixtures";

const notFound = (what: string) => ({ status: 404, body: { status: "failed", error: `${what} not found` } });

describe("pipelines: security", () => {
  it("answers 401 with the Group A bodies on every route without a valid key", async () => {
    const id = "0123456789abcdef01234567";
    const routes: [string, string][] = [
      ["POST", "/v1/pipeline"],
      ["GET", `/v1/pipeline?id=${id}`],
      ["GET", "/v1/pipelines"],
      ["DELETE", `/v1/pipeline/${id}`],
      ["POST", `/v1/pipeline/${id}/run`],
      ["GET", `/v1/pipeline/${id}/run/status/${id}`],
      ["GET", `/v1/pipeline/${id}/runs`],
      ["POST", `/v1/pipeline/${id}/bulk-run`],
      ["POST", `/v1/pipeline/${id}/bulk_run`],
      ["POST", `/v1/pipeline/${id}/pause`],
      ["POST", `/v1/pipeline/${id}/resume`],
      ["POST", `/v1/pipeline/${id}/terminate`],
    ];
    for (const [method, path] of routes) {
      const missing = await call(path, { method });
      expect([path, missing.status, await missing.json()]).toEqual([path, 401, { error: "Missing authorization header" }]);
      const malformed = await call(path, { method, headers: { authorization: "Token abc" } });
      expect(await malformed.json()).toEqual({ error: "Invalid authorization header format" });
      const wrong = await call(path, { method, headers: { authorization: "Bearer sk_000000000000000000000000000000000000000000000000" } });
      expect([wrong.status, await wrong.json()]).toEqual([401, { error: "Invalid API key" }]);
    }
  });

  it("hides another organization's pipelines and runs behind 404s", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const id = await createPipeline(theirs.owner.apiKey, WITH_APPROVAL);
    const run = await send(theirs.owner.apiKey, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "secret" } });
    const runId = String(run.body.run_id);
    const key = mine.owner.apiKey;

    expect(await send(key, "GET", `/v1/pipeline?id=${id}`)).toEqual(notFound("pipeline"));
    expect((await send(key, "GET", "/v1/pipelines?include_shared=true")).body.object_ids).toEqual([]);
    expect(await send(key, "DELETE", `/v1/pipeline/${id}`)).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } })).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/bulk-run`, { runs: [{ inputs: { q: "x" } }] })).toEqual(notFound("pipeline"));
    expect(await send(key, "GET", `/v1/pipeline/${id}/runs`)).toEqual(notFound("pipeline"));
    expect(await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual(notFound("pipeline"));

    // Their run reached through my own pipeline's routes is just as unknown.
    const own = await createPipeline(key, SMALLEST);
    expect(await send(key, "GET", `/v1/pipeline/${own}/run/status/${runId}`)).toEqual(notFound(`run ${runId}`));
    expect(await send(key, "POST", `/v1/pipeline/${own}/resume`, { run_ids: [runId] })).toEqual(notFound(`run ${runId}`));
    expect(await send(key, "POST", `/v1/pipeline/${own}/terminate`, { run_id: runId })).toEqual(notFound(`run ${runId}`));

    // Nothing changed for the owner: the run is still paused, its definition intact.
    const status = await send(theirs.owner.apiKey, "GET", `/v1/pipeline/${id}/run/status/${runId}`);
    expect(status.body.status).toBe("paused");
  });

  it("cannot fetch another organization's pipeline by name", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    await createPipeline(theirs.owner.apiKey, SMALLEST, "shared-name");
    expect(await send(mine.owner.apiKey, "GET", `/v1/pipeline?name=shared-name&username=${theirs.owner.username}`)).toEqual(notFound("record"));
    expect(await send(mine.owner.apiKey, "GET", `/v1/pipeline?name=shared-name&org_name=${theirs.name}`)).toEqual(notFound("record"));
  });
  it("scans templates full of braces for references in one pass, finding what the old regex found", async () => {
    const org = await seedOrg();
    // /\{\{([^}]*)\}\}/g retried from every "{": quadratic, about 2 s of CPU for this 1 MB definition.
    const braces = "{".repeat(32 * 1024 - 16);
    const texts = Array.from({ length: 28 }, (_, i) => ({ id: `t${i}`, type: "text", config: { text: braces } }));
    const definition = {
      nodes: [{ id: "in", type: "input", config: { name: "q", type: "text" } }, ...texts, { id: "out", type: "output", config: { name: "answer", value: "{{t0}}" } }],
      edges: [...texts.map((t) => ({ source: "in", target: t.id })), { source: "t0", target: "out" }],
    };
    expect((await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: "braces", ...definition })).status).toBe(200);
    // The same scan still finds and names a malformed reference among the braces.
    texts[5].config.text = `{{in + 1}}${braces}`;
    expect(await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: "braces-bad", ...definition })).toEqual({
      status: 400,
      body: { status: "failed", error: `node t5: config.text: "{{in + 1}}" is not a valid reference (use {{node_id}} or {{node_id.output}})` },
    });
  });
});
