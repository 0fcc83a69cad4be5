import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { sdkRequest, type Body } from "./sdk-wire";

/** `Transformation.new(...)`: every key the SDK sends, with its defaults (`description: ""`, `function_name: ""`). */
function sdkNew(
  apiKey: string,
  body: { name?: string; function_name?: string; inputs?: Body; outputs?: Body; function: string },
) {
  return sdkRequest(apiKey, "POST", "/transformation", {
    json: {
      name: body.name ?? `t-${crypto.randomUUID()}`,
      description: "",
      function_name: body.function_name ?? "",
      inputs: body.inputs ?? {},
      outputs: body.outputs ?? {},
      function: body.function,
    },
  });
}

const sdkRun = (apiKey: string, id: string, inputs: Body) =>
  sdkRequest(apiKey, "POST", `/transformation/${id}/run`, { json: { inputs } });

const SUMMARY_PY = [
  "def summarize(count, ratio, flag, label, tags, when, extra, scores):",
  "    return {'line': label + ':' + ','.join(tags) + ':' + str(count + 1), 'ok': flag, 'share': ratio * 2, 'total': sum(scores.values())}",
  "",
].join("\n");

describe("the hosted SDK's Transformation against Loom", () => {
  it("new with function_name '' and the SDK's io type names; fetch shows the function it resolved; run validates by those types", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const created = await sdkNew(key, {
      name: "sdk-summary",
      inputs: {
        count: "int32",
        ratio: "float",
        flag: "bool",
        label: "string",
        tags: "vec<string>",
        when: "timestamp",
        extra: "any",
        scores: "map<string, int64>",
      },
      outputs: { line: "string", ok: "bool", share: "float64", total: "int64" },
      function: SUMMARY_PY,
    });
    expect(created.status).toBe(200);
    const id = String(created.body.id);

    const fetched = await sdkRequest(key, "GET", "/transformation", { query: { name: "sdk-summary" } });
    expect(fetched.body.object).toMatchObject({
      _id: id,
      function_name: "summarize",
      inputs: { count: "int32", tags: "vec<string>" },
      outputs: { line: "string" },
    });

    const ran = await sdkRun(key, id, {
      count: 2,
      ratio: 0.25,
      flag: true,
      label: "x",
      tags: ["a", "b"],
      when: "2024-05-01T10:00:00Z",
      extra: { any: ["thing"] },
      scores: { a: 1, b: 2 },
    });
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(ran.body.result).toEqual({ line: "x:a,b:3", ok: true, share: 0.5, total: 3 });

    // Inputs are the caller's data: `extra: null` reaches the function as None (`any` takes it).
    const valid = {
      count: 2,
      ratio: 0.25,
      flag: true,
      label: "x",
      tags: ["a"],
      when: 1714557600,
      extra: null,
      scores: {},
    };
    expect((await sdkRun(key, id, valid)).body.result).toEqual({ line: "x:a:3", ok: true, share: 0.5, total: 0 });
    const { extra: _dropped, ...missing } = valid;
    expect((await sdkRun(key, id, missing)).body.error).toBe(
      'inputs: Instance does not have required property "extra".',
    );
    expect((await sdkRun(key, id, { ...valid, count: "2" })).body.error).toMatch(/^inputs\.count: /);
    expect((await sdkRun(key, id, { ...valid, count: 2 ** 31 })).body.error).toMatch(/^inputs\.count: /);
    expect((await sdkRun(key, id, { ...valid, tags: ["a", 1] })).body.error).toMatch(/^inputs\.tags\.1: /);
    expect((await sdkRun(key, id, { ...valid, scores: { a: 1.5 } })).body.error).toMatch(/^inputs\.scores\.a: /);
    expect((await sdkRun(key, id, { ...valid, when: true })).body.error).toMatch(/^inputs\.when: /);
  });

  it("function_name '' picks the only function in JavaScript too, and a file input takes Loom's file value", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const source = "const sizeOf = ({ doc }) => ({ chars: doc.raw_bytes.length, name: doc.metadata.name });\n";
    const created = await sdkRequest(key, "POST", "/transformation", {
      json: {
        name: "js-file",
        description: "",
        function_name: "",
        language: "javascript",
        inputs: { doc: "file" },
        outputs: { chars: "int32", name: "string" },
        function: source,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const ran = await sdkRun(key, String(created.body.id), {
      doc: { type: "file", raw_bytes: btoa("hello"), metadata: { name: "h.txt", mime_type: "text/plain", size: 5 } },
    });
    expect(ran.body).toEqual({ status: "success", result: { chars: 8, name: "h.txt" } });
    expect((await sdkRun(key, String(created.body.id), { doc: "h.txt" })).body.error).toMatch(/^inputs\.doc: /);
  });

  it("function_name '' with several functions or none is a 400 asking for the name", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const two = await sdkNew(key, {
      function: "def helper(x):\n    return x\n\ndef main(x):\n    return {'y': helper(x)}\n",
    });
    expect(two).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "function_name: the source defines several functions (helper, main); name the one to run",
      },
    });
    const none = await sdkNew(key, { function: "x = 1\n" });
    expect(none).toEqual({
      status: 400,
      body: {
        status: "failed",
        error: "function_name: the source defines no top-level function; define one or name it",
      },
    });
    // Named explicitly, the same two-function source is fine.
    expect(
      (
        await sdkNew(key, {
          function_name: "main",
          function: "def helper(x):\n    return x\n\ndef main(x):\n    return {'y': helper(x)}\n",
        })
      ).status,
    ).toBe(200);
  });

  it("inputs given as {name: {io_type, description}} (the SDK's pipeline and agent shape) are read by io_type", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const created = await sdkNew(key, {
      inputs: { x: { io_type: "int32", description: "a number" } },
      outputs: { y: { io_type: "int32" } },
      function: "def double(x):\n    return {'y': x * 2}\n",
    });
    expect(created.status).toBe(200);
    expect((await sdkRun(key, String(created.body.id), { x: 4 })).body.result).toEqual({ y: 8 });
    expect((await sdkRun(key, String(created.body.id), { x: "4" })).body.error).toMatch(/^inputs\.x: /);
  });

  it("an unknown type name is a 400 naming the field", async () => {
    const key = (await seedOrg()).owner.apiKey;
    const res = await sdkNew(key, { inputs: { x: "vec<decimal>" }, function: "def f(x):\n    return {}\n" });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/^input_schema\.x has an unknown type "vec<decimal>"/);
    expect(
      (await sdkNew(key, { inputs: { x: "map<int32, string>" }, function: "def f(x):\n    return {}\n" })).body.error,
    ).toMatch(/^input_schema\.x has an unknown type/);
  });
});
