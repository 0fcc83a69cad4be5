import { describe, expect, it } from "vitest";
import { call, seedOrg } from "../helpers";
import { createPipeline, send, SMALLEST, waitForRun, WITH_APPROVAL, NAP } from "./fixtures";

const notFound = (what: string) => ({ status: 404, body: { status: "failed", error: `${what} not found` } });
const forbidden = (error: string) => ({ status: 403, body: { status: "failed", error } });
const ok = { status: 200, body: { status: "success" } };

async function startRun(key: string, pipelineId: string, background = true): Promise<string> {
  const run = await send(key, "POST", `/v1/pipeline/${pipelineId}/run`, { inputs: { q: "x" }, background });
  expect(run.status).toBe(200);
  return String(run.body.run_id);
}

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
      expect([path, missing.status, await missing.json()]).toEqual([
        path,
        401,
        { error: "Missing authorization header" },
      ]);
      const malformed = await call(path, { method, headers: { authorization: "Token abc" } });
      expect(await malformed.json()).toEqual({ error: "Invalid authorization header format" });
      const wrong = await call(path, {
        method,
        headers: { authorization: "Bearer sk_000000000000000000000000000000000000000000000000" },
      });
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
    expect(await send(key, "POST", `/v1/pipeline/${id}/bulk-run`, { runs: [{ inputs: { q: "x" } }] })).toEqual(
      notFound("pipeline"),
    );
    expect(await send(key, "GET", `/v1/pipeline/${id}/runs`)).toEqual(notFound("pipeline"));
    expect(await send(key, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual(notFound("pipeline"));
    expect(await send(key, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual(notFound("pipeline"));

    // Their run reached through my own pipeline's routes is just as unknown.
    const own = await createPipeline(key, SMALLEST);
    expect(await send(key, "GET", `/v1/pipeline/${own}/run/status/${runId}`)).toEqual(notFound(`run ${runId}`));
    expect(await send(key, "POST", `/v1/pipeline/${own}/resume`, { run_ids: [runId] })).toEqual(
      notFound(`run ${runId}`),
    );
    expect(await send(key, "POST", `/v1/pipeline/${own}/terminate`, { run_id: runId })).toEqual(
      notFound(`run ${runId}`),
    );

    // Nothing changed for the owner: the run is still paused, its definition intact.
    const status = await send(theirs.owner.apiKey, "GET", `/v1/pipeline/${id}/run/status/${runId}`);
    expect(status.body.status).toBe("paused");
  });

  it("cannot fetch another organization's pipeline by name", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    await createPipeline(theirs.owner.apiKey, SMALLEST, "shared-name");
    expect(
      await send(mine.owner.apiKey, "GET", `/v1/pipeline?name=shared-name&username=${theirs.owner.username}`),
    ).toEqual(notFound("record"));
    expect(await send(mine.owner.apiKey, "GET", `/v1/pipeline?name=shared-name&org_name=${theirs.name}`)).toEqual(
      notFound("record"),
    );
  });

  it("lets only a run's starter, the pipeline's owner or an admin pause, resume or terminate it", async () => {
    const org = await seedOrg();
    const author = await org.addMember("member");
    const starter = await org.addMember("member");
    const bystander = await org.addMember("member");
    const admin = await org.addMember("admin");
    const id = await createPipeline(author.apiKey, NAP);
    const runId = await startRun(starter.apiKey, id);
    const refusal = (action: string) =>
      forbidden(`only the user who started run ${runId}, the pipeline's owner or an admin can ${action} it`);

    expect(await send(bystander.apiKey, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual(
      refusal("pause"),
    );
    expect(await send(bystander.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual(
      refusal("terminate"),
    );
    expect((await send(bystander.apiKey, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).body.status).toBe(
      "in_progress",
    );

    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual(ok);
    expect(await send(bystander.apiKey, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual(
      refusal("resume"),
    );
    expect((await send(bystander.apiKey, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).body.status).toBe("paused");
    expect(await send(author.apiKey, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual(ok);
    expect(await send(author.apiKey, "POST", `/v1/pipeline/${id}/pause`, { run_id: runId })).toEqual(ok);
    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [runId] })).toEqual(ok);
    expect(await send(bystander.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual(
      refusal("terminate"),
    );
    expect(await send(admin.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: runId })).toEqual(ok);
    expect((await send(starter.apiKey, "GET", `/v1/pipeline/${id}/run/status/${runId}`)).body).toMatchObject({
      status: "terminated",
      error: "terminated by request",
    });

    // The starter ends their own run; the organization's owner ends anyone's.
    const own = await startRun(starter.apiKey, id);
    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: own })).toEqual(ok);
    const other = await startRun(bystander.apiKey, id);
    expect(await send(org.owner.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: other })).toEqual(ok);
    // Resuming several runs is all or nothing, permissions included: one run not yours stops them all.
    const mine = await startRun(starter.apiKey, id);
    const theirs = await startRun(bystander.apiKey, id);
    for (const [key, run] of [
      [starter.apiKey, mine],
      [bystander.apiKey, theirs],
    ])
      expect(await send(key, "POST", `/v1/pipeline/${id}/pause`, { run_id: run })).toEqual(ok);
    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${id}/resume`, { run_ids: [mine, theirs] })).toEqual(
      forbidden(`only the user who started run ${theirs}, the pipeline's owner or an admin can resume it`),
    );
    expect((await send(starter.apiKey, "GET", `/v1/pipeline/${id}/run/status/${mine}`)).body.status).toBe("paused");
    for (const run of [mine, theirs])
      expect(await send(admin.apiKey, "POST", `/v1/pipeline/${id}/terminate`, { run_id: run })).toEqual(ok);
  });

  it("approving is its own permission: the pipeline's owner, an admin or a listed approver, not the run's starter", async () => {
    const org = await seedOrg();
    const author = await org.addMember("member");
    const starter = await org.addMember("member");
    const approver = await org.addMember("member");
    const admin = await org.addMember("admin");
    const refusal = (runId: string) =>
      forbidden(
        `run ${runId} is waiting for approval at node gate; only the pipeline's owner, an admin or the node's approvers can approve it`,
      );

    const gated = await createPipeline(author.apiKey, WITH_APPROVAL);
    const first = await startRun(starter.apiKey, gated, false);
    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${gated}/resume`, { run_ids: [first] })).toEqual(
      refusal(first),
    );
    expect(await send(approver.apiKey, "POST", `/v1/pipeline/${gated}/resume`, { run_ids: [first] })).toEqual(
      refusal(first),
    );
    expect((await send(starter.apiKey, "GET", `/v1/pipeline/${gated}/run/status/${first}`)).body.status).toBe("paused");
    expect(await send(author.apiKey, "POST", `/v1/pipeline/${gated}/resume`, { run_ids: [first] })).toEqual(ok);
    expect(await waitForRun(starter.apiKey, gated, first)).toMatchObject({
      status: "completed",
      result: { answer: "Hello x" },
    });
    const second = await startRun(starter.apiKey, gated, false);
    expect(await send(admin.apiKey, "POST", `/v1/pipeline/${gated}/resume`, { run_ids: [second] })).toEqual(ok);
    expect(await waitForRun(starter.apiKey, gated, second)).toMatchObject({ status: "completed" });

    // A node may name its approvers; they approve even runs they neither started nor own.
    const withApprovers = {
      ...WITH_APPROVAL,
      nodes: WITH_APPROVAL.nodes.map((n) => (n.id === "gate" ? { ...n, config: { approvers: [approver.userId] } } : n)),
    };
    const listed = await createPipeline(author.apiKey, withApprovers);
    const third = await startRun(starter.apiKey, listed, false);
    expect(await send(starter.apiKey, "POST", `/v1/pipeline/${listed}/resume`, { run_ids: [third] })).toEqual(
      refusal(third),
    );
    expect(await send(approver.apiKey, "POST", `/v1/pipeline/${listed}/resume`, { run_ids: [third] })).toEqual(ok);
    expect(await waitForRun(starter.apiKey, listed, third)).toMatchObject({
      status: "completed",
      result: { answer: "Hello x" },
    });

    // Approvers are users of the pipeline's organization.
    const stranger = await seedOrg();
    const foreign = {
      ...WITH_APPROVAL,
      nodes: WITH_APPROVAL.nodes.map((n) =>
        n.id === "gate" ? { ...n, config: { approvers: [stranger.owner.userId] } } : n,
      ),
    };
    expect(await send(author.apiKey, "POST", "/v1/pipeline", { name: "foreign-approver", ...foreign })).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: `node gate: approver ${stranger.owner.userId} is not a user of your organization`,
      },
    });
  });

  it("scans templates full of braces for references in one pass, finding what the old regex found", async () => {
    const org = await seedOrg();
    // /\{\{([^}]*)\}\}/g retried from every "{": quadratic, about 2 s of CPU for this 1 MB definition.
    const braces = "{".repeat(32 * 1024 - 16);
    const texts = Array.from({ length: 28 }, (_, i) => ({ id: `t${i}`, type: "text", config: { text: braces } }));
    const definition = {
      nodes: [
        { id: "in", type: "input", config: { name: "q", type: "text" } },
        ...texts,
        { id: "out", type: "output", config: { name: "answer", value: "{{t0}}" } },
      ],
      edges: [...texts.map((t) => ({ source: "in", target: t.id })), { source: "t0", target: "out" }],
    };
    expect((await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: "braces", ...definition })).status).toBe(200);
    // The same scan still finds and names a malformed reference among the braces.
    texts[5].config.text = `{{in + 1}}${braces}`;
    expect(await send(org.owner.apiKey, "POST", "/v1/pipeline", { name: "braces-bad", ...definition })).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: `node t5: config.text: "{{in + 1}}" is not a valid reference (use {{node_id}} or {{node_id.output}})`,
      },
    });
  });

  it("updates a definition only as its owner or an admin, never across organizations, and never into a cycle of sub-pipelines", async () => {
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const id = await createPipeline(key, SMALLEST);
    const changed = {
      ...SMALLEST,
      nodes: SMALLEST.nodes.map((n) => (n.id === "greet" ? { ...n, config: { text: "Bye {{in}}" } } : n)),
    };
    const member = await org.addMember("member");
    expect(await send(member.apiKey, "POST", `/v1/update/pipeline/${id}`, changed)).toEqual(
      forbidden("only the pipeline's owner or an admin can change it"),
    );
    const viewer = await org.addMember("viewer");
    expect(await send(viewer.apiKey, "POST", `/v1/update/pipeline/${id}`, changed)).toEqual(
      forbidden("viewers cannot create or change records"),
    );
    const stranger = await seedOrg();
    expect(await send(stranger.owner.apiKey, "POST", `/v1/update/pipeline/${id}`, changed)).toEqual(
      notFound("pipeline"),
    );
    // None of the refusals changed it.
    expect((await send(key, "POST", `/v1/pipeline/${id}/run`, { inputs: { q: "x" } })).body).toMatchObject({
      outputs: { answer: "Hello x" },
    });

    // A sub-pipeline that runs the pipeline being updated, directly or through another, is a cycle.
    const runs = (target: string) => ({
      nodes: [
        { id: "in", type: "input", config: { name: "q" } },
        { id: "sub", type: "pipeline", config: { pipeline_id: target, inputs: { q: "{{in}}" } } },
        { id: "out", type: "output", config: { name: "answer", value: "{{sub.answer}}" } },
      ],
      edges: [
        { source: "in", target: "sub" },
        { source: "sub", target: "out" },
      ],
    });
    expect(await send(key, "POST", `/v1/update/pipeline/${id}`, runs(id))).toEqual({
      status: 400,
      body: { status: "failed", error: "node sub: a pipeline cannot run itself as a sub-pipeline" },
    });
    const outer = await createPipeline(key, runs(id));
    expect(await send(key, "POST", `/v1/update/pipeline/${id}`, runs(outer))).toEqual({
      status: 400,
      body: { status: "failed", error: "node sub: its sub-pipelines run this pipeline again (a cycle 2 deep)" },
    });
  });
});
