// The generated-client check (issue 12): openapi-typescript turns the live /openapi.json of a
// Loom started as `npm start` starts it into types, and TypeScript checks a small client
// (loom-client-sample.ts) that calls routes of every group and reads typed fields of their
// answers and error bodies. A route documented without a usable body fails the check; the client
// then runs against the same Loom, so the types are held to real answers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { startLoom, type Loom } from "../test-browser/harness";
import { exerciseLoom } from "./loom-client-sample";

const SAMPLE = fileURLToPath(new URL("./loom-client-sample.ts", import.meta.url));
const GENERATED = new URL("./generated/", import.meta.url);

type OpenApiDoc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: { schemas: Record<string, unknown> } };

let loom: Loom;
let live: OpenApiDoc;

/** Generates the client's types from a document, as `npx openapi-typescript <url> --default-non-nullable=false` would. */
async function generate(doc: OpenApiDoc): Promise<void> {
  // Request fields with a default stay optional for the caller (openapi-typescript's default makes them required).
  const ast = await openapiTS(JSON.stringify(doc), { defaultNonNullable: false });
  mkdirSync(GENERATED, { recursive: true });
  writeFileSync(new URL("loom-api.d.ts", GENERATED), astToString(ast));
}

const COMPILER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ES2022,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
};

/**
 * The three checks below differ only in the generated types: every other file (TypeScript's lib
 * files, lib.dom among them, openapi-fetch's types, the sample) is parsed once and handed to each
 * check again, instead of re-read and re-parsed three times (seconds each on a loaded machine).
 */
const GENERATED_DIR = fileURLToPath(GENERATED);
const host = ts.createCompilerHost(COMPILER_OPTIONS);
const parsed = new Map<string, ts.SourceFile | undefined>();
const readSourceFile = host.getSourceFile.bind(host);
host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
  if (fileName.startsWith(GENERATED_DIR)) return readSourceFile(fileName, languageVersion, onError, shouldCreate);
  if (!parsed.has(fileName)) parsed.set(fileName, readSourceFile(fileName, languageVersion, onError, shouldCreate));
  return parsed.get(fileName);
};

/** The sample client's type errors, as `tsc --strict --noEmit` reports them. */
function typeErrors(): string[] {
  const program = ts.createProgram([SAMPLE], COMPILER_OPTIONS, host);
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
}

beforeAll(async () => {
  loom = await startLoom({});
  const res = await fetch(`${loom.url}/openapi.json`);
  expect(res.status).toBe(200);
  live = (await res.json()) as OpenApiDoc;
});

afterAll(async () => {
  await loom?.stop();
});

describe("a client generated from /openapi.json", () => {
  // The calls run first, while the connection to Loom is fresh; type checks take seconds of idle time.
  it("the sample client reads real answers of every group through the typed calls", async () => {
    const read = await exerciseLoom(loom.url);
    expect(read).toMatchObject({
      keyName: "generated-client",
      queries: ["how long do refunds take?"],
      pipelineOutputs: { answer: "Hello world" },
      chatbotPipelineObjectId: null,
      transformationIds: [],
      records: { kbName: "client handbook", documentStatus: expect.any(String), pipelineVersion: 1, pipelineFirstNode: "input", transformationLanguage: "javascript" },
      agentName: "client agent",
      groupAMissing: { status: 404, error: "knowledge base not found" },
      groupAUnauthorized: { status: 401, error: expect.any(String) },
      groupBMissing: { status: 404, detail: expect.any(String) },
      groupBInvalid: { status: 422, loc: ["body", "pipeline"], type: "missing" },
    });
    expect(read.chunkCount).toBeGreaterThan(0);
    expect(read.records.kbChunkSize).toBeGreaterThan(0);
    expect(read.chatbotAnswer).toContain("14 days");
  });

  it("fails the check when a route's success body or an error body is untyped", async () => {
    const untypedSuccess = structuredClone(live);
    untypedSuccess.paths["/v1/knowledge-base/{id}/query"].post.responses["200"].content = { "application/json": { schema: {} } };
    await generate(untypedSuccess);
    expect(typeErrors().join("\n")).toContain("post /v1/knowledge-base/{id}/query");

    const untypedError = structuredClone(live);
    untypedError.components.schemas.GroupAError = {};
    await generate(untypedError);
    expect(typeErrors().join("\n")).toMatch(/Property 'error' does not exist/);
  });

  it("types every call of every group: the sample client compiles against the live document", async () => {
    await generate(live);
    expect(typeErrors()).toEqual([]);
  });
});
