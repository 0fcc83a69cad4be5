import { describe, expect, it } from "vitest";
import { bearer, json, seedOrg } from "../helpers";
import { NO_PLACEMENT } from "../../src/sandbox/sandbox";
import {
  DOUBLE_JS,
  DOUBLE_PY,
  addMember,
  callWith,
  create,
  createDoubleJs,
  createDoublePy,
  createRaw,
  get,
  placedAt,
  remove,
  run,
  uniqueName,
} from "./fixtures";

async function expectCreateFails(body: Parameters<typeof createRaw>[1], status: number, error: string | RegExp) {
  const org = await seedOrg();
  const response = await createRaw(org.owner, { name: uniqueName(), ...body });
  const payload = (await response.json()) as { status: string; error: string };
  expect(response.status, JSON.stringify(payload)).toBe(status);
  expect(payload.status).toBe("failed");
  if (typeof error === "string") expect(payload.error).toBe(error);
  else expect(payload.error).toMatch(error);
}

describe("transformations: creation errors", () => {
  it("requires a name, function_name and function", async () => {
    await expectCreateFails({ name: undefined, function_name: "f", function: DOUBLE_PY }, 400, /^name: /);
    await expectCreateFails({ function: DOUBLE_PY }, 400, /^function_name: /);
    await expectCreateFails({ function_name: "double" }, 400, /^function: /);
  });

  it("refuses a function_name that is not an identifier", async () => {
    await expectCreateFails(
      { function_name: "double; drop", function: DOUBLE_PY },
      400,
      "function_name: must be an identifier (letters, digits and underscores, not starting with a digit)",
    );
  });

  it("refuses an unknown language", async () => {
    await expectCreateFails({ function_name: "double", function: DOUBLE_PY, language: "ruby" }, 400, /^language: /);
  });

  it("refuses source that does not parse, in either language, without running it", async () => {
    await expectCreateFails(
      { function_name: "f", function: "function f( { return 1 }", language: "javascript" },
      400,
      /^function source does not parse: SyntaxError: /,
    );
    await expectCreateFails(
      { function_name: "f", function: "def f(:\n    return 1\n" },
      400,
      "function source does not parse: SyntaxError: invalid syntax",
    );
    // Parsing only: top-level code that would loop forever is never run at creation.
    const org = await seedOrg();
    await create(org.owner, { function_name: "f", function: "while True:\n    pass\ndef f():\n    return {}\n" });
  });

  it("refuses source that does not define function_name", async () => {
    await expectCreateFails(
      { function_name: "missing", function: DOUBLE_JS, language: "javascript" },
      400,
      "function_name 'missing' is not defined in the function source",
    );
    await expectCreateFails(
      { function_name: "missing", function: DOUBLE_PY },
      400,
      "function_name 'missing' is not defined in the function source",
    );
  });

  it("refuses invalid schemas, naming the field", async () => {
    await expectCreateFails(
      { function_name: "double", function: DOUBLE_PY, input_schema: { x: "decimal" } },
      400,
      /^input_schema\.x has an unknown type "decimal"/,
    );
    await expectCreateFails(
      {
        function_name: "double",
        function: DOUBLE_PY,
        output_schema: { type: "object", properties: { y: { type: "numeric" } } },
      },
      400,
      'output_schema.properties.y.type has an unknown type "numeric"',
    );
    await expectCreateFails(
      { function_name: "double", function: DOUBLE_PY, inputs: { type: "object", required: "x" } },
      400,
      "input_schema.required must be an array of property names",
    );
    await expectCreateFails(
      {
        function_name: "double",
        function: DOUBLE_PY,
        input_schema: { type: "object", properties: { x: { type: "string", pattern: "(" } } },
      },
      400,
      "input_schema.properties.x.pattern is not a valid regular expression",
    );
    await expectCreateFails(
      { function_name: "double", function: DOUBLE_PY, input_schema: "not json" },
      400,
      /^input_schema: /,
    );
  });

  it("answers 409 when the owner already has a transformation of that name", async () => {
    const org = await seedOrg();
    const name = uniqueName("dup");
    await create(org.owner, { name, function_name: "double", function: DOUBLE_PY });
    const response = await createRaw(org.owner, { name, function_name: "double", function: DOUBLE_PY });
    expect(response.status).toBe(409);
    expect(await response.json()).toEqual({
      status: "failed",
      error: `a transformation named '${name}' already exists`,
    });
  });

  it("answers 403 to a viewer creating or deleting", async () => {
    const org = await seedOrg();
    const viewer = await addMember(org, "viewer");
    const response = await createRaw(viewer, { name: uniqueName(), function_name: "double", function: DOUBLE_PY });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ status: "failed", error: "viewers cannot create or change records" });
    const id = await createDoublePy(org.owner);
    expect((await remove(viewer, id)).status).toBe(403);
    // Viewers may still read and run.
    expect((await run(viewer, id, { x: 1 })).body).toEqual({ status: "success", result: { y: 2 } });
  });

  it("answers 403 to a member deleting another member's transformation", async () => {
    const org = await seedOrg();
    const a = await addMember(org, "member");
    const b = await addMember(org, "member");
    const id = await createDoubleJs(a);
    const response = await remove(b, id);
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({
      status: "failed",
      error: "only the transformation's owner or an admin can change it",
    });
  });
});

describe("transformations: fetch errors", () => {
  it("needs an id or a name", async () => {
    const org = await seedOrg();
    const response = await get(org.owner, "");
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ status: "failed", error: "Either id or name must be provided" });
  });

  it("answers 404 for an unknown id or name, and 400 for a malformed id", async () => {
    const org = await seedOrg();
    for (const query of ["id=0123456789abcdef01234567", "name=nothing-here"]) {
      const response = await get(org.owner, query);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ status: "failed", error: "transformation not found" });
    }
    expect((await get(org.owner, "id=xyz")).status).toBe(400);
    expect((await remove(org.owner, "0123456789abcdef01234567")).status).toBe(404);
  });
});

describe("transformations: run errors", () => {
  it("validates inputs against the input schema, naming the field", async () => {
    const org = await seedOrg();
    const id = await createDoublePy(org.owner);
    const wrongType = await run(org.owner, id, { x: "two" });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.status).toBe("failed");
    expect(wrongType.body.error).toMatch(/^inputs\.x: /);
    const missing = await run(org.owner, id, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatch(/^inputs: .*"x"/);
  });

  it("validates outputs against the output schema, naming the field", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function: "function f() { return { y: 'not a number' }; }",
      output_schema: { y: "number" },
    });
    const result = await run(org.owner, id, {});
    expect(result.status).toBe(400);
    expect(result.body.error).toMatch(/^outputs\.y: /);
    const py = await create(org.owner, {
      function_name: "f",
      function: "def f():\n    return {}\n",
      output_schema: { y: "number" },
    });
    expect((await run(org.owner, py, {})).body.error).toMatch(/^outputs: .*"y"/);
  });

  it("reports an exception raised by the function", async () => {
    const org = await seedOrg();
    const js = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function: "function f() { throw new TypeError('bad thing'); }",
    });
    expect(await run(org.owner, js, {})).toEqual({
      status: 400,
      body: { status: "failed", error: "transformation raised an error: TypeError: bad thing" },
    });
    const py = await create(org.owner, { function_name: "f", function: "def f():\n    return {'r': 1 / 0}\n" });
    expect(await run(org.owner, py, {})).toEqual({
      status: 400,
      body: { status: "failed", error: "transformation raised an error: ZeroDivisionError: divide by zero" },
    });
    const args = await create(org.owner, { function_name: "f", function: "def f(a):\n    return {'a': a}\n" });
    expect((await run(org.owner, args, { b: 1 })).body.error).toMatch(/^transformation raised an error: TypeError: /);
  });

  it("refuses a body whose inputs is not an object", async () => {
    const org = await seedOrg();
    const id = await createDoublePy(org.owner);
    const result = await run(org.owner, id, [1, 2]);
    expect(result.status).toBe(400);
    expect(result.body.error).toMatch(/^inputs: /);
  });

  it("answers 503 where the deployment offers no sandbox (no loader, inline not chosen), and runs inline only when chosen", async () => {
    const org = await seedOrg();
    const id = await createDoublePy(org.owner);
    const refused = { status: "failed", error: NO_PLACEMENT };
    const noLoader = { LOADER: undefined };
    const created = await callWith(
      noLoader,
      "/v1/transformation",
      json({ name: uniqueName(), function_name: "double", function: DOUBLE_PY }, bearer(org.owner.apiKey)),
    );
    expect({ status: created.status, body: await created.json() }).toEqual({ status: 503, body: refused });
    expect(await placedAt(noLoader).run(org.owner, id, { x: 2 })).toEqual({ status: 503, body: refused });
    expect(await placedAt({ ...noLoader, SANDBOX_PLACEMENT: "inline" }).run(org.owner, id, { x: 2 })).toEqual({
      status: 200,
      body: { status: "success", result: { y: 4 } },
    });
  });
});
