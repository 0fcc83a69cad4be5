import { describe, expect, it } from "vitest";
import { env } from "cloudflare:test";
import { bearer, call, callWith, json, seedOrg, type Member } from "../helpers";
import {
  create,
  createDoubleJs,
  createDoublePy,
  createRaw,
  get,
  list,
  remove,
  run,
  runRaw,
  uniqueName,
} from "./fixtures";

const BUDGET = "transformation exceeded its instruction budget";
const MEMORY = "transformation exceeded its memory limit";
const STACK = "transformation exceeded its stack limit";
const NOT_JSON = "transformation must return a JSON object";
const TOO_LARGE = "transformation output exceeds 1048576 bytes";
const NO_JS = "transformation raised an error: ImportError: no module named 'js'";

interface Hostile {
  what: string;
  language: "javascript" | "python";
  source: string;
  /** The documented error, or for contained probes the result the sandbox answers. */
  error?: string | RegExp;
  result?: Record<string, unknown>;
}

const corpus: Hostile[] = [
  { what: "an infinite loop", language: "javascript", source: "function f() { while (true) {} }", error: BUDGET },
  { what: "an infinite loop", language: "python", source: "def f():\n    while True:\n        pass\n", error: BUDGET },
  {
    what: "a loop at top level",
    language: "python",
    source: "def f():\n    return {}\nwhile True:\n    pass\n",
    error: BUDGET,
  },
  {
    what: "sleeping (a busy wait inside the interpreter)",
    language: "python",
    source: "import time\ndef f():\n    time.sleep(3600)\n    return {}\n",
    error: BUDGET,
  },
  {
    what: "printing without end",
    language: "python",
    source: "def f():\n    while True:\n        print('x' * 1000)\n",
    error: BUDGET,
  },
  {
    what: "catching the memory error and going on",
    language: "javascript",
    source: "function f() { const a = []; for (;;) { try { a.push(new Uint8Array(1 << 20)); } catch (e) {} } }",
    error: BUDGET,
  },
  {
    what: "deep recursion",
    language: "javascript",
    source: "function f() { const r = (n) => r(n + 1) + 1; return { v: r(0) }; }",
    error: STACK,
  },
  {
    what: "deep recursion",
    language: "python",
    source: "def f():\n    def r(n):\n        return r(n + 1) + 1\n    return {'v': r(0)}\n",
    error: STACK,
  },
  {
    what: "a memory flood",
    language: "javascript",
    source: "function f() { const a = []; for (;;) a.push(new Uint8Array(1 << 20)); }",
    error: MEMORY,
  },
  {
    what: "a memory flood",
    language: "python",
    source: "def f():\n    a = []\n    while True:\n        a.append(bytearray(1000000))\n",
    error: MEMORY,
  },
  {
    what: "one huge allocation",
    language: "python",
    source: "def f():\n    return {'s': 'x' * (10 ** 9)}\n",
    error: MEMORY,
  },
  {
    what: "a catastrophic regular expression",
    language: "javascript",
    source: "function f() { return { m: /^(a+)+$/.test('a'.repeat(40) + 'b') }; }",
    error: BUDGET,
  },
  {
    what: "a catastrophic regular expression",
    language: "python",
    source: "import re\ndef f():\n    return {'m': bool(re.match('^(a+)+$', 'a' * 40 + 'b'))}\n",
    error: BUDGET,
  },
  {
    what: "calling fetch",
    language: "javascript",
    source: "async function f() { const r = await fetch('https://example.com'); return { s: r.status }; }",
    error: "transformation raised an error: ReferenceError: 'fetch' is not defined",
  },
  // The js module is no longer in the build (issue 11): every probe through it stops at the import.
  {
    what: "calling fetch through the js module",
    language: "python",
    source: "import js\ndef f():\n    return {'s': str(js.fetch('https://example.com'))}\n",
    error: NO_JS,
  },
  {
    what: "host globals",
    language: "javascript",
    source:
      "function f() { return { t: [typeof fetch, typeof process, typeof Request, typeof caches, typeof WebAssembly, typeof setTimeout, typeof navigator] }; }",
    result: { t: Array(7).fill("undefined") },
  },
  {
    what: "globalThis through the js module",
    language: "python",
    source: "import js\ndef f():\n    return {'g': str(js.globalThis)}\n",
    error: NO_JS,
  },
  {
    what: "the js module's contents",
    language: "python",
    source: "import js\ndef f():\n    return {'names': [n for n in dir(js) if not n.startswith('__')]}\n",
    error: NO_JS,
  },
  {
    what: "constructor.constructor",
    language: "javascript",
    source:
      "function f() { const F = ({}).constructor.constructor; return { t: F('return typeof fetch + typeof process')() }; }",
    result: { t: "undefinedundefined" },
  },
  {
    what: "constructor through the js module",
    language: "python",
    source: "import js\ndef f():\n    return {'c': str(js.constructor)}\n",
    error: NO_JS,
  },
  {
    what: "dynamic import()",
    language: "javascript",
    source: "async function f() { const m = await import('node:fs'); return { m: typeof m }; }",
    error: "transformation raised an error: ReferenceError: could not load module 'node:fs'",
  },
  {
    what: "importing a network module",
    language: "python",
    source: "def f():\n    s = __import__('socket')\n    return {}\n",
    error: "transformation raised an error: ImportError: no module named 'socket'",
  },
  {
    what: "a non-JSON value (BigInt)",
    language: "javascript",
    source: "function f() { return { n: 1n }; }",
    error: NOT_JSON,
  },
  { what: "a non-object result", language: "javascript", source: "function f() { return 42; }", error: NOT_JSON },
  {
    what: "a non-JSON value (set)",
    language: "python",
    source: "def f():\n    return {'s': {1, 2}}\n",
    error: NOT_JSON,
  },
  {
    what: "a non-JSON value (NaN)",
    language: "python",
    source: "def f():\n    return {'n': float('nan')}\n",
    error: NOT_JSON,
  },
  { what: "a non-object result", language: "python", source: "def f():\n    return [1, 2]\n", error: NOT_JSON },
  {
    what: "a huge output",
    language: "javascript",
    source: "function f() { return { s: 'x'.repeat(2000000) }; }",
    error: TOO_LARGE,
  },
  {
    what: "a huge output",
    language: "python",
    source: "def f():\n    return {'s': 'x' * 1100000}\n",
    error: TOO_LARGE,
  },
];

async function expectNormalRunWorks(member: Member, jsId: string, pyId: string) {
  expect((await run(member, jsId, { x: 5 })).body).toEqual({ status: "success", result: { y: 10 } });
  expect((await run(member, pyId, { x: 5 })).body).toEqual({ status: "success", result: { y: 10 } });
}

describe("transformations: hostile functions end in bounded time with their documented error", () => {
  for (const hostile of corpus) {
    it(`${hostile.language}: ${hostile.what}`, async () => {
      const org = await seedOrg();
      const id = await create(org.owner, { function_name: "f", language: hostile.language, function: hostile.source });
      const outcome = await run(org.owner, id, {});
      if (hostile.result) {
        expect(outcome).toEqual({ status: 200, body: { status: "success", result: hostile.result } });
      } else {
        expect(outcome.status, JSON.stringify(outcome.body)).toBe(400);
        expect(outcome.body.status).toBe("failed");
        if (typeof hostile.error === "string") expect(outcome.body.error).toBe(hostile.error);
        else expect(outcome.body.error).toMatch(hostile.error as RegExp);
      }
      // The sandbox is unharmed: the next runs of ordinary functions work.
      await expectNormalRunWorks(org.owner, await createDoubleJs(org.owner), await createDoublePy(org.owner));
    });
  }

  it("keeps at most 100 lines of printed output, and says when it dropped some", async () => {
    const org = await seedOrg();
    for (const [language, source] of [
      [
        "javascript",
        "function f() { console.log('x'.repeat(3000)); for (let i = 0; i < 400; i++) console.log(i + ' ' + 'y'.repeat(100)); return { done: true }; }",
      ],
      [
        "python",
        "def f():\n    print('x' * 3000)\n    for i in range(400):\n        print(i, 'y' * 100)\n    return {'done': True}\n",
      ],
    ] as const) {
      const id = await create(org.owner, { function_name: "f", language, function: source });
      const { status, body } = await run(org.owner, id, {});
      expect(status, JSON.stringify(body).slice(0, 300)).toBe(200);
      expect(body.result).toEqual({ done: true });
      const logs = body.logs as string[];
      expect(logs.length).toBeLessThanOrEqual(101);
      expect(logs.join("").length).toBeLessThanOrEqual(16_384 + 2_000);
      expect(logs[0]).toBe(`${"x".repeat(1_000)}...`);
      expect(logs[1]).toBe(`0 ${"y".repeat(100)}`);
      expect(logs.at(-1)).toBe("[more output dropped: a run keeps 100 lines, 16384 bytes]");
    }
  });

  it("keeps working after several runaway runs in a row", async () => {
    const org = await seedOrg();
    const loop = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function: "function f() { for (;;) {} }",
    });
    const pyLoop = await create(org.owner, {
      function_name: "f",
      function: "def f():\n    while True:\n        pass\n",
    });
    const results = await Promise.all([run(org.owner, loop, {}), run(org.owner, pyLoop, {}), run(org.owner, loop, {})]);
    for (const result of results) expect(result.body).toEqual({ status: "failed", error: BUDGET });
    await expectNormalRunWorks(org.owner, await createDoubleJs(org.owner), await createDoublePy(org.owner));
  });
});

describe("transformations: tenancy", () => {
  it("hides another organization's transformations (404, never listed)", async () => {
    const a = await seedOrg();
    const b = await seedOrg();
    const id = await createDoubleJs(a.owner);
    for (const response of [await get(b.owner, `id=${id}`), await remove(b.owner, id)]) {
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ status: "failed", error: "transformation not found" });
    }
    expect(await run(b.owner, id, { x: 1 })).toEqual({
      status: 404,
      body: { status: "failed", error: "transformation not found" },
    });
    const listed = (await (await list(b.owner, "include_shared=true&verbose=true")).json()) as { object_ids: string[] };
    expect(listed.object_ids).not.toContain(id);
    const fetched = (await (await get(a.owner, `id=${id}`)).json()) as { object: { name: string } };
    expect(
      (await get(b.owner, `name=${encodeURIComponent(fetched.object.name)}&org_name=${encodeURIComponent(a.name)}`))
        .status,
    ).toBe(404);
    expect(
      (await get(b.owner, `name=${encodeURIComponent(fetched.object.name)}&username=${a.owner.username}`)).status,
    ).toBe(404);
    // Still there for its owner.
    expect((await run(a.owner, id, { x: 1 })).body).toEqual({ status: "success", result: { y: 2 } });
  });
});

describe("transformations: authentication", () => {
  const id = "0123456789abcdef01234567";
  const routes: [string, string, RequestInit][] = [
    ["POST", "/v1/transformation", json({ name: "x", function_name: "f", function: "def f():\n    return {}\n" })],
    ["GET", "/v1/transformation?id=" + id, {}],
    ["GET", "/v1/transformations", {}],
    ["DELETE", `/v1/transformation/${id}`, {}],
    ["POST", `/v1/transformation/${id}/run`, json({ inputs: {} })],
  ];

  for (const [method, path, init] of routes) {
    it(`${method} ${path.split("?")[0]} answers 401 without a valid API key`, async () => {
      const headers = (extra: Record<string, string>) => ({
        ...((init.headers as Record<string, string>) ?? {}),
        ...extra,
      });
      const missing = await call(path, { ...init, method, headers: headers({}) });
      expect(missing.status).toBe(401);
      expect(await missing.json()).toEqual({ error: "Missing authorization header" });
      const malformed = await call(path, { ...init, method, headers: headers({ authorization: "Basic abc" }) });
      expect(malformed.status).toBe(401);
      expect(await malformed.json()).toEqual({ error: "Invalid authorization header format" });
      const wrong = await call(path, { ...init, method, headers: headers(bearer("sk_not_a_real_key")) });
      expect(wrong.status).toBe(401);
      expect(await wrong.json()).toEqual({ error: "Invalid API key" });
    });
  }
});

describe("transformations: sandbox rate limit", () => {
  const tight = { SANDBOX_LIMITER: env.TEST_TIGHT_LIMITER };
  const runWith = (member: Member, id: string, x: number) =>
    callWith(tight, `/v1/transformation/${id}/run`, json({ inputs: { x } }, bearer(member.apiKey)));

  it("counts every member's runs and checks against the organization, answering 429 with Retry-After; other organizations run on", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const id = await createDoubleJs(org.owner);
    const passed: number[] = [];
    let throttled: Response | undefined;
    // The limit is 3 a minute; one window boundary may fall inside the loop, so a 429 comes within 7.
    for (let i = 0; i < 7 && !throttled; i++) {
      const response = await runWith(i % 2 ? member : org.owner, id, i);
      if (response.status === 429) throttled = response;
      else passed.push(response.status);
    }
    expect(passed.length).toBeGreaterThanOrEqual(3);
    expect(passed.every((s) => s === 200)).toBe(true);
    const body = {
      status: "failed",
      error: "your organization has started too many transformation runs this minute; wait a minute and try again",
    };
    expect([throttled?.status, await throttled?.json()]).toEqual([429, body]);
    expect(throttled?.headers.get("retry-after")).toBe("60");
    // Creating one checks the source in the sandbox too, so it is counted the same way.
    const create = await callWith(
      tight,
      "/v1/transformation",
      json(
        {
          name: `t${crypto.randomUUID().slice(0, 8)}`,
          function_name: "double",
          function: "function double({ x }) { return { y: x }; }",
          language: "javascript",
        },
        bearer(member.apiKey),
      ),
    );
    expect([create.status, await create.json()]).toEqual([429, body]);

    const other = await seedOrg();
    expect((await runWith(other.owner, await createDoubleJs(other.owner), 1)).status).toBe(200);
  });
});

describe("transformations: hostile type names", () => {
  it("a deeply nested or huge type name is a short 400, not a crash or an echo of the whole name", async () => {
    const org = await seedOrg();
    for (const type of [
      "vec<".repeat(5_000) + "string" + ">".repeat(5_000),
      `map<string, ${"x".repeat(50_000)}>`,
      "vec<" + ",".repeat(50_000) + ">",
    ]) {
      const response = await call(
        "/v1/transformation",
        json(
          { name: "bomb", function_name: "f", function: "def f(x):\n    return {}\n", inputs: { x: type } },
          bearer(org.owner.apiKey),
        ),
      );
      const text = await response.text();
      expect(response.status).toBe(400);
      expect(text.length).toBeLessThan(2_000);
      expect(JSON.parse(text).error).toMatch(/^input_schema\.x has an unknown type /);
    }
  });

  it("an empty function_name resolves only to an identifier the source declares at top level", async () => {
    const org = await seedOrg();
    // Nested and indented definitions are not candidates; the one top-level function is.
    const id = await create(org.owner, {
      function_name: "",
      function: "def outer(x):\n    def inner(y):\n        return y\n    return {'y': inner(x)}\n",
    });
    expect((await (await get(org.owner, `id=${id}`)).json()) as { object: { function_name: string } }).toMatchObject({
      object: { function_name: "outer" },
    });
    expect((await run(org.owner, id, { x: 1 })).body).toEqual({ status: "success", result: { y: 1 } });
  });
});

/** Creation must fail with `error`, and leave nothing under that name. */
async function expectSchemaRefused(
  member: Member,
  schemas: { input_schema?: unknown; output_schema?: unknown },
  error: string | RegExp,
) {
  const name = uniqueName("refused");
  const response = await createRaw(member, {
    name,
    function_name: "f",
    function: "def f(**kw):\n    return {}\n",
    ...schemas,
  });
  const body = (await response.json()) as { status: string; error: string };
  expect(response.status, JSON.stringify(body)).toBe(400);
  if (typeof error === "string") expect(body.error).toBe(error);
  else expect(body.error).toMatch(error);
  expect((await get(member, `name=${name}`)).status).toBe(404);
}

function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

const TOO_MUCH =
  "inputs: checking this value against the schema would take too much work; simplify the schema or send a smaller value";

describe("transformations: user schemas cannot make the API Worker work without bound", () => {
  it("matches a catastrophic pattern in linear time: 10,000 characters get their answer", async () => {
    const org = await seedOrg();
    const evil = "^(a+)+$";
    const id = await create(org.owner, {
      function_name: "f",
      function: "def f(**kw):\n    return {'n': len(kw)}\n",
      input_schema: {
        type: "object",
        properties: { s: { type: "string", pattern: evil } },
        patternProperties: { [evil]: { type: "number" } },
        propertyNames: { pattern: "^(a+|s)+$" },
      },
    });
    const many = "a".repeat(10_000);
    expect(await run(org.owner, id, { s: `${many}!` })).toEqual({
      status: 400,
      body: { status: "failed", error: `inputs.s: String does not match pattern "${evil}".` },
    });
    expect(await run(org.owner, id, { s: many })).toEqual({
      status: 200,
      body: { status: "success", result: { n: 1 } },
    });
    // A property name is matched by the same engine, for patternProperties and propertyNames.
    expect(await run(org.owner, id, { [many]: "not a number" })).toEqual({
      status: 400,
      body: { status: "failed", error: `inputs.${many}: Instance type "string" is invalid. Expected "number".` },
    });
    expect((await run(org.owner, id, { [`${many}!`]: 1 })).body.error).toBe(
      `inputs.${many}!: String does not match pattern "^(a+|s)+$".`,
    );
  });

  it("never runs the validator's own backtracking format regexes on user text", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "f",
      function: "def f(u):\n    return {'ok': True}\n",
      input_schema: { u: { type: "string", format: "url" } },
    });
    // The library's `url` regex backtracks exponentially on this; the URL parser answers at once.
    expect((await run(org.owner, id, { u: `http://${"a".repeat(10_000)}.aa!` })).status).toBe(200);
    expect(await run(org.owner, id, { u: "not a url" })).toEqual({
      status: 400,
      body: { status: "failed", error: 'inputs.u: String does not match format "url".' },
    });
  });

  it("refuses, at creation and naming the field, patterns that cannot run in linear time", async () => {
    const org = await seedOrg();
    const linear = /patterns are RE2: no lookarounds or backreferences/;
    await expectSchemaRefused(
      org.owner,
      { input_schema: { s: { type: "string", pattern: "^(?=a)a+$" } } },
      new RegExp(`^input_schema\\.s\\.pattern uses syntax Loom does not run \\(${linear.source}\\)`),
    );
    await expectSchemaRefused(
      org.owner,
      { output_schema: { type: "object", properties: { s: { pattern: "(a)\\1" } } } },
      /^output_schema\.properties\.s\.pattern uses syntax Loom does not run/,
    );
    await expectSchemaRefused(
      org.owner,
      { input_schema: { s: { pattern: "(?<x>a)\\k<x>" } } },
      "input_schema.s.pattern uses syntax Loom does not run (patterns are RE2: no lookarounds or backreferences): \\k",
    );
    await expectSchemaRefused(
      org.owner,
      { input_schema: { type: "object", patternProperties: { "(?<!x)y": true } } },
      /^input_schema\.patternProperties: the pattern "\(\?<!x\)y" uses syntax Loom does not run/,
    );
    // Counted repetition multiplies the program (and its compile time): measured before compiling.
    const large =
      "is too large once its repetitions are expanded (at most 2000 RE2 instructions); use smaller repetition counts";
    await expectSchemaRefused(
      org.owner,
      { input_schema: { s: { pattern: "a{1000}".repeat(142) } } },
      `input_schema.s.pattern ${large}`,
    );
    const many = Object.fromEntries(
      Array.from({ length: 33 }, (_, i) => [`f${i}`, { type: "string", pattern: `^${i}` }]),
    );
    await expectSchemaRefused(
      org.owner,
      { input_schema: many },
      "input_schema.f32.pattern is one too many: a schema may use at most 32 distinct patterns",
    );
  });

  it("refuses a $ref that leads back to itself without consuming the value, and stores nothing", async () => {
    const org = await seedOrg();
    const loop =
      'a $ref leads back to itself without descending into the value (as {"$ref": "#"} does), so it could never be checked';
    await expectSchemaRefused(org.owner, { input_schema: { $ref: "#" } }, `input_schema: ${loop}`);
    await expectSchemaRefused(
      org.owner,
      {
        output_schema: {
          type: "object",
          $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }] }, b: { not: { $ref: "#/$defs/a" } } },
          $ref: "#/$defs/a",
        },
      },
      `output_schema: ${loop}`,
    );
    await expectSchemaRefused(
      org.owner,
      { input_schema: { type: "object", $ref: "#/$defs/nowhere" } },
      'input_schema.$ref names no schema in this schema ("#/$defs/nowhere")',
    );
    await expectSchemaRefused(
      org.owner,
      { input_schema: { type: "object", $ref: "https://example.com/schema.json" } },
      /^input_schema\.\$ref must be "#", "#\/\$defs\/<name>" or "#\/definitions\/<name>"/,
    );
    // Recursion that descends into the value is fine, to the depth a body may have.
    const id = await create(org.owner, {
      function_name: "f",
      function: "def f(**kw):\n    return {}\n",
      input_schema: { type: "object", properties: { a: { $ref: "#" } }, additionalProperties: false },
    });
    expect((await run(org.owner, id, nested(60))).status).toBe(200);
    expect((await run(org.owner, id, { a: { a: { b: 1 } } })).body.error).toBe("inputs.a.a.b: False boolean schema.");
  });

  it("answers 400 before validating when the work would grow past the budget", async () => {
    const org = await seedOrg();
    // Both allOf branches lead back through property `a`: the work doubles with every level.
    const doubling = {
      type: "object",
      $defs: {
        n: { allOf: [{ $ref: "#/$defs/m" }, { $ref: "#/$defs/m" }] },
        m: { type: "object", properties: { a: { $ref: "#/$defs/n" } } },
      },
      $ref: "#/$defs/n",
    };
    const id = await create(org.owner, {
      function_name: "f",
      function: "def f(**kw):\n    return {}\n",
      input_schema: doubling,
    });
    expect((await run(org.owner, id, nested(5))).status).toBe(200);
    expect(await run(org.owner, id, nested(22))).toEqual({ status: 400, body: { status: "failed", error: TOO_MUCH } });
    const unique = await create(org.owner, {
      function_name: "f",
      function: "def f(**kw):\n    return {}\n",
      input_schema: { list: { type: "array", uniqueItems: true } },
    });
    expect(await run(org.owner, unique, { list: Array.from({ length: 20_000 }, (_, i) => i) })).toEqual({
      status: 400,
      body: { status: "failed", error: TOO_MUCH },
    });
    expect(await run(org.owner, unique, { list: [1, 2, 1] })).toEqual({
      status: 400,
      body: { status: "failed", error: "inputs.list: Duplicate items at indexes 0 and 2." },
    });
  });

  it("answers 400, not 500, to values nested past 64 levels, in inputs or in a function's result", async () => {
    const org = await seedOrg();
    const id = await create(org.owner, {
      function_name: "f",
      language: "javascript",
      function: "function f({ depth }) { let v = {}; for (let i = 0; i < depth; i++) v = { a: v }; return { v }; }",
    });
    expect((await run(org.owner, id, { depth: 10 })).status).toBe(200);
    expect(await run(org.owner, id, { depth: 3_000 })).toEqual({
      status: 400,
      body: { status: "failed", error: "outputs nests deeper than 64 levels" },
    });
    const response = await runRaw(org.owner, id, nested(5_000));
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ status: "failed", error: "request body nests deeper than 64 levels" });
  });
});
