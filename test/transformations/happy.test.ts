import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, call, form, seedOrg } from "../helpers";
import { runTransformation } from "../../src/features/transformations/transformations.service";
import { runTask } from "../../src/sandbox/engine";
import { DEFAULT_LIMITS, sandboxPlacement } from "../../src/sandbox/sandbox";
import quickjs from "../../src/sandbox/generated/quickjs.wasm";
import micropython from "../../src/sandbox/generated/micropython.wasm";
import {
  DOUBLE_JS,
  DOUBLE_PY,
  addMember,
  create,
  createDoubleJs,
  createDoublePy,
  get,
  list,
  remove,
  run,
  uniqueName,
} from "./fixtures";

describe("transformations: happy paths", () => {
  it("creates a JavaScript transformation and runs it", async () => {
    const org = await seedOrg();
    const id = await createDoubleJs(org.owner);
    expect(id).toMatch(/^[0-9a-f]{24}$/);
    expect(await run(org.owner, id, { x: 21 })).toEqual({
      status: 200,
      body: { status: "success", result: { y: 42 } },
    });
  });

  it("creates a Python transformation (the default language) taking keyword arguments", async () => {
    const org = await seedOrg();
    const id = await createDoublePy(org.owner);
    expect(await run(org.owner, id, { x: 4 })).toEqual({ status: 200, body: { status: "success", result: { y: 8 } } });
  });

  it("runs again and again, each run in a fresh interpreter", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "count",
      language: "javascript",
      function: "let calls = 0;\nfunction count() { calls += 1; return { calls }; }",
    });
    for (let i = 0; i < 3; i++) expect((await run(org.owner, id, {})).body.result).toEqual({ calls: 1 });
    const py = await create(org.owner, {
      function_name: "count",
      function: "calls = [0]\ndef count():\n    calls[0] += 1\n    return {'calls': calls[0]}\n",
    });
    for (let i = 0; i < 2; i++) expect((await run(org.owner, py, {})).body.result).toEqual({ calls: 1 });
  });

  it("returns what the function printed as logs, one string per line, and nothing when it printed nothing", async () => {
    const org = await seedOrg();
    const js = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function:
        "function f({ x }) { console.log('got', x, { deep: [1, 2] }); console.warn('careful'); return { y: x + 1 }; }",
    });
    expect((await run(org.owner, js, { x: 1 })).body).toEqual({
      status: "success",
      result: { y: 2 },
      logs: ['got 1 {"deep":[1,2]}', "careful"],
    });
    const py = await create(org.owner, {
      function_name: "f",
      function:
        "print('loaded')\ndef f(x):\n    print('got', x)\n    print('no newline at the end', end='')\n    return {'y': x + 1}\n",
    });
    // Top-level prints are part of the run too: the source is loaded afresh for every run.
    expect((await run(org.owner, py, { x: 1 })).body).toEqual({
      status: "success",
      result: { y: 2 },
      logs: ["loaded", "got 1", "no newline at the end"],
    });
    expect((await run(org.owner, await createDoubleJs(org.owner), { x: 1 })).body).toEqual({
      status: "success",
      result: { y: 2 },
    });
  });

  it("awaits an async JavaScript function", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "later",
      language: "javascript",
      function:
        "async function later({ words }) { await null; return { count: words.length, upper: words.map((w) => w.toUpperCase()) }; }",
    });
    expect((await run(org.owner, id, { words: ["a", "b"] })).body.result).toEqual({ count: 2, upper: ["A", "B"] });
  });

  it("accepts full JSON Schemas and the SDK's inputs/outputs aliases", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "greet",
      function: "def greet(name, times=1):\n    return {'greeting': ' '.join(['hello ' + name] * times)}\n",
      inputs: {
        type: "object",
        properties: { name: { type: "string", minLength: 1 }, times: { type: "integer", minimum: 1 } },
        required: ["name"],
      },
      outputs: { type: "object", properties: { greeting: { type: "string" } }, required: ["greeting"] },
    });
    expect((await run(org.owner, id, { name: "ada", times: 2 })).body.result).toEqual({
      greeting: "hello ada hello ada",
    });
    const fetched = (await (await get(org.owner, `id=${id}`)).json()) as { object: Record<string, unknown> };
    expect(fetched.object.inputs).toMatchObject({ type: "object", required: ["name"] });
    expect(fetched.object.outputs).toMatchObject({ required: ["greeting"] });
  });

  it("accepts a form-encoded body with schemas as JSON text", async () => {
    const org = await seedOrg();
    const name = uniqueName("form");
    const response = await call(
      "/v1/transformation",
      form(
        {
          name,
          function_name: "double",
          language: "javascript",
          function: DOUBLE_JS,
          input_schema: JSON.stringify({ x: "number" }),
          output_schema: JSON.stringify({ y: "number" }),
        },
        bearer(org.owner.apiKey),
      ),
    );
    const body = (await response.json()) as { status: string; id: string };
    expect(response.status).toBe(200);
    expect((await run(org.owner, body.id, { x: 1.5 })).body.result).toEqual({ y: 3 });
  });

  it("fetches by id and by name, with every documented field", async () => {
    const org = await seedOrg();
    const name = uniqueName("fetch");
    const id = await create(org.owner, {
      name,
      description: "doubles x",
      function_name: "double",
      function: DOUBLE_PY,
      input_schema: { x: "number" },
      output_schema: { y: "number" },
    });
    const byId = (await (await get(org.owner, `id=${id}`)).json()) as {
      status: string;
      object: Record<string, unknown>;
    };
    expect(byId.status).toBe("success");
    expect(byId.object).toMatchObject({
      _id: id,
      name,
      description: "doubles x",
      function_name: "double",
      function: DOUBLE_PY,
      inputs: { x: "number" },
      outputs: { y: "number" },
      language: "python",
      ownerId: org.owner.userId,
      orgId: org.orgId,
    });
    expect(typeof byId.object.createdAt).toBe("string");
    expect(typeof byId.object.updatedAt).toBe("string");
    const byName = (await (await get(org.owner, `name=${encodeURIComponent(name)}`)).json()) as {
      object: Record<string, unknown>;
    };
    expect(byName.object._id).toBe(id);
    const byOwner = (await (
      await get(org.owner, `name=${encodeURIComponent(name)}&username=${org.owner.username}&org_name=${org.name}`)
    ).json()) as { object: Record<string, unknown> };
    expect(byOwner.object._id).toBe(id);
  });

  it("lists your own, or with include_shared everyone's in the organization; objects only when verbose", async () => {
    const org = await seedOrg();
    const member = await addMember(org, "member");
    const mine = await createDoubleJs(org.owner);
    const theirs = await createDoublePy(member);
    const own = (await (await list(org.owner)).json()) as { status: string; object_ids: string[]; objects: unknown[] };
    expect(own).toEqual({ status: "success", object_ids: [mine], objects: [] });
    const shared = (await (await list(org.owner, "include_shared=true&verbose=true")).json()) as {
      object_ids: string[];
      objects: { _id: string }[];
    };
    expect(shared.object_ids.sort()).toEqual([mine, theirs].sort());
    expect(shared.objects.map((o) => o._id).sort()).toEqual([mine, theirs].sort());
  });

  it("deletes, after which it is gone", async () => {
    const org = await seedOrg();
    const id = await createDoubleJs(org.owner);
    const response = await remove(org.owner, id);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "success" });
    expect((await get(org.owner, `id=${id}`)).status).toBe(404);
    expect((await run(org.owner, id, { x: 1 })).status).toBe(404);
  });

  it("lets an admin delete a member's transformation", async () => {
    const org = await seedOrg();
    const member = await addMember(org, "member");
    const admin = await addMember(org, "admin");
    const id = await createDoubleJs(member);
    expect((await remove(admin, id)).status).toBe(200);
  });

  it("frees a name for reuse once deleted, and names are per owner", async () => {
    const org = await seedOrg();
    const member = await addMember(org, "member");
    const name = uniqueName("same");
    const first = await create(org.owner, { name, function_name: "double", function: DOUBLE_PY });
    await create(member, { name, function_name: "double", function: DOUBLE_PY });
    await remove(org.owner, first);
    await create(org.owner, { name, function_name: "double", function: DOUBLE_PY });
  });

  it("exports runTransformation for other features (pipelines)", async () => {
    const org = await seedOrg();
    const id = await createDoublePy(org.owner);
    const result = await runTransformation(
      env,
      { userId: org.owner.userId, orgId: org.orgId, role: "owner", via: "api_key" },
      id,
      { x: 10 },
    );
    expect(result).toEqual({ y: 20 });
  });

  it("takes large inputs and returns large outputs within the default budget", async () => {
    const org = await seedOrg();
    const text = "lorem ipsum ".repeat(40_000);
    const py = await create(org.owner, {
      function_name: "echo",
      function: "def echo(text):\n    return {'n': len(text), 'text': text}\n",
      input_schema: { text: "string" },
    });
    const js = await create(org.owner, {
      function_name: "echo",
      language: "javascript",
      function: "function echo({ text }) { return { n: text.length, text }; }",
      input_schema: { text: "string" },
    });
    for (const id of [py, js])
      expect((await run(org.owner, id, { text })).body).toEqual({
        status: "success",
        result: { n: text.length, text },
      });
  });

  it("hands nested inputs with long and short strings to Python intact", async () => {
    const org = await seedOrg();
    const docs = [
      { id: 1, text: "a".repeat(5000), tags: ["x", "y".repeat(300)] },
      { id: 2, text: "short", meta: { note: "é😀".repeat(200), n: null, ok: true, f: 1.5 } },
    ];
    const id = await create(org.owner, {
      function_name: "echo",
      function: "def echo(docs):\n    return {'docs': docs, 'lengths': [len(d['text']) for d in docs]}\n",
    });
    expect((await run(org.owner, id, { docs })).body).toEqual({
      status: "success",
      result: { docs, lengths: [5000, 5] },
    });
  });

  it("documents every route in the OpenAPI document", async () => {
    const doc = (await (await call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths["/v1/transformation"])).toEqual(expect.arrayContaining(["post", "get"]));
    expect(doc.paths["/v1/transformations"]).toHaveProperty("get");
    expect(doc.paths["/v1/transformation/{id}"]).toHaveProperty("delete");
    expect(doc.paths["/v1/transformation/{id}/run"]).toHaveProperty("post");
  });

  it("places runs in a Dynamic Worker where the deployment has a loader (as here), inline only when chosen", () => {
    expect(sandboxPlacement(env)).toBe("loader");
    expect(sandboxPlacement({ ...env, SANDBOX_PLACEMENT: "inline" })).toBe("inline");
    expect(sandboxPlacement({ ...env, LOADER: undefined, SANDBOX_PLACEMENT: "inline" })).toBe("inline");
    // No loader and no explicit choice: refused, never inline by default (issue 11).
    expect(sandboxPlacement({ ...env, LOADER: undefined })).toBe("none");
  });

  it("runs the same engine inside this Worker when there is no loader", async () => {
    const wasm = { quickjs, micropython };
    const js = await runTask(
      {
        kind: "run",
        language: "javascript",
        source: DOUBLE_JS,
        functionName: "double",
        inputsJson: '{"x":3}',
        limits: DEFAULT_LIMITS,
      },
      wasm,
    );
    const py = await runTask(
      {
        kind: "run",
        language: "python",
        source: DOUBLE_PY,
        functionName: "double",
        inputsJson: '{"x":3}',
        limits: DEFAULT_LIMITS,
      },
      wasm,
    );
    expect(js).toEqual({ ok: true, outputJson: '{"y":6}' });
    expect(py).toEqual({ ok: true, outputJson: '{"y":6}' });
    const loop = await runTask(
      {
        kind: "run",
        language: "python",
        source: "def f():\n    while True: pass\n",
        functionName: "f",
        inputsJson: "{}",
        limits: DEFAULT_LIMITS,
      },
      wasm,
    );
    expect(loop).toEqual({ ok: false, failure: "fuel", message: "transformation exceeded its instruction budget" });
  });
});
