import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { SMALLEST, createPipeline } from "../pipelines/fixtures";
import { checkResponse, openApiDoc, operations, type OpenApiDoc, type Operation } from "./openapi-contract";

const ERROR_COMPONENT: Record<"A" | "B", (status: number) => string> = {
  A: (status) => (status === 401 ? "Unauthorized" : "GroupAError"),
  B: (status) => (status === 422 ? "HTTPValidationError" : "GroupBError"),
};

const refOf = (op: Operation, status: string): string | undefined => {
  const schema = op.responses[status]?.content?.["application/json"]?.schema as { $ref?: string } | undefined;
  return schema?.$ref?.replace("#/components/schemas/", "");
};

type SchemaNode = {
  $ref?: string;
  properties?: Record<string, unknown>;
  items?: unknown;
  type?: string;
  allOf?: SchemaNode[];
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
};

/** Whether a schema, with its $ref followed (as a generated client follows it), says anything a client could type. */
function hasShape(doc: OpenApiDoc, schema: SchemaNode | undefined, seen = new Set<string>()): boolean {
  if (!schema) return false;
  if (schema.$ref) {
    const name = schema.$ref.replace("#/components/schemas/", "");
    if (seen.has(name)) return true;
    seen.add(name);
    return hasShape(doc, doc.components.schemas[name] as SchemaNode | undefined, seen);
  }
  const parts = [...(schema.allOf ?? []), ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])];
  if (parts.length > 0) return parts.every((part) => hasShape(doc, part, seen));
  if (schema.properties) return Object.keys(schema.properties).length > 0;
  return schema.items !== undefined || (typeof schema.type === "string" && schema.type !== "object");
}

/** A success with no body schema, or one that is empty once its $ref is followed, documents nothing a client could type. */
function untypedSuccess(doc: OpenApiDoc, op: Operation): boolean {
  const successes = Object.entries(op.responses).filter(([status]) => status.startsWith("2"));
  if (successes.length === 0) return true;
  return successes.some(([, answer]) => {
    const content = Object.values(answer.content ?? {});
    return content.length === 0 || content.some((media) => !hasShape(doc, media.schema as SchemaNode));
  });
}

describe("/openapi.json documents every response", () => {
  it("every operation documents a typed success and each error status with its group's error body", async () => {
    const doc = await openApiDoc();
    for (const name of ["GroupAError", "Unauthorized", "GroupBError", "HTTPValidationError"])
      expect(doc.components.schemas, name).toHaveProperty(name);
    const problems: string[] = [];
    const untyped: string[] = [];
    for (const [method, path, op] of operations(doc)) {
      const label = `${method.toUpperCase()} ${path}`;
      const group = path.startsWith("/v1/") ? "A" : "B";
      if (untypedSuccess(doc, op)) untyped.push(label);
      if (!op.responses["500"]) problems.push(`${label}: no 500`);
      if (op.security?.length && !op.responses["401"]) problems.push(`${label}: authenticated but no 401`);
      for (const status of Object.keys(op.responses).filter((s) => Number(s) >= 400)) {
        const expected = ERROR_COMPONENT[group](Number(status));
        if (refOf(op, status) !== expected)
          problems.push(`${label}: ${status} is ${refOf(op, status)}, expected ${expected}`);
      }
    }
    expect(problems).toEqual([]);
    expect(untyped, "operations whose success body is not typed").toEqual([]);
  });

  it("the error bodies are the contract's shapes: {status: failed, error}, {error}, {detail}, {detail: [{loc, msg, type}]}", async () => {
    const { schemas } = (await openApiDoc()).components;
    expect(schemas.GroupAError).toMatchObject({
      type: "object",
      required: expect.arrayContaining(["status", "error"]),
      properties: { status: { type: "string", enum: ["failed"] }, error: { type: "string" } },
    });
    expect(schemas.Unauthorized).toMatchObject({
      type: "object",
      required: ["error"],
      properties: { error: { type: "string" } },
    });
    expect(schemas.GroupBError).toMatchObject({
      type: "object",
      required: ["detail"],
      properties: { detail: { type: "string" } },
    });
    expect(schemas.HTTPValidationError).toMatchObject({
      type: "object",
      required: ["detail"],
      properties: { detail: { type: "array", items: { $ref: "#/components/schemas/ValidationError" } } },
    });
    expect(schemas.ValidationError).toMatchObject({
      type: "object",
      required: expect.arrayContaining(["loc", "msg", "type"]),
      properties: { msg: { type: "string" }, type: { type: "string" } },
    });
  });

  it("the seed's named agent types are components under those names", async () => {
    const doc = await openApiDoc();
    for (const name of [
      "AgentDescription",
      "MarketplaceAgentDescription",
      "AgentsFavoritesDescription",
      "AgentsHistoryDescription",
    ])
      expect(doc.components.schemas, name).toHaveProperty(name);
  });
});

describe("every route's real responses match /openapi.json", () => {
  it("a sweep over every route: anonymous, with foreign ids, and with real resources; each status and body is the documented one", async () => {
    const doc = await openApiDoc();
    const org = await seedOrg();
    const kbId = await createKb(org.owner.apiKey);
    await indexText(org.owner.apiKey, kbId, "a.txt", "Loom documents every response.");
    const pipelineId = await createPipeline(org.owner.apiKey, SMALLEST);
    const chatbot = await call(
      "/v1/chatbot",
      json({ name: "sweep", system_prompt: "Answer briefly." }, bearer(org.owner.apiKey)),
    );
    const chatbotId = String(((await chatbot.json()) as { id: string }).id);
    expect((await call("/chatbots/deploy", form({ chatbot_id: chatbotId }, bearer(org.owner.token)))).status).toBe(200);
    const problems: string[] = [];
    const statuses = new Set<string>();
    let successes = 0;
    const fake = "aaaaaaaaaaaaaaaaaaaaaaaa";
    for (const [method, path] of operations(doc)) {
      if (path === "/admin/owner/change") continue; // would hand the org away mid-sweep
      const group = path.startsWith("/v1/") ? "A" : "B";
      const credential = group === "A" ? org.owner.apiKey : org.owner.token;
      const real = path.includes("knowledge-base")
        ? kbId
        : path.includes("pipeline")
          ? pipelineId
          : path.includes("chatbot")
            ? chatbotId
            : fake;
      const attempts: [string, string, RequestInit][] = [
        ["anonymous", path.replace(/\{[^}]+\}/g, fake), { method: method.toUpperCase() }],
        [
          "foreign ids",
          path.replace(/\{[^}]+\}/g, fake),
          { method: method.toUpperCase(), headers: bearer(credential) },
        ],
        ["real ids", path.replace(/\{[^}]+\}/g, real), { method: method.toUpperCase(), headers: bearer(credential) }],
      ];
      if (method !== "get")
        for (const attempt of attempts)
          Object.assign(attempt[2], json({}, attempt[2].headers as Record<string, string>), {
            method: method.toUpperCase(),
          });
      for (const [how, concrete, init] of attempts) {
        const response = await call(concrete, init);
        statuses.add(`${response.status < 300 ? "2xx" : response.status}`);
        if (response.status < 300) successes += 1;
        problems.push(
          ...(await checkResponse(doc, method, path, response, `${method.toUpperCase()} ${concrete} (${how})`)),
        );
      }
    }
    expect(problems).toEqual([]);
    // The sweep reaches successes and every kind of error body, so each schema is exercised for real.
    expect(successes).toBeGreaterThanOrEqual(40);
    for (const status of ["2xx", "401", "404", "422", "400"]) expect([...statuses], status).toContain(status);
  }, 180_000);
});

describe("Group B validation failures are 422 HTTPValidationError", () => {
  const issue = (loc: string[], msg: string, type: string) => ({ detail: [{ loc, msg, type }] });

  it("an unknown role, a connection named by nothing, a chatbot with only a name", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const auth = bearer(org.owner.token);
    const changed = await call("/admin/users/change", form({ user_id: member.userId, role: "emperor" }, auth, "PUT"));
    expect([changed.status, await changed.json()]).toEqual([
      422,
      issue(["body", "role"], "must be one of admin, member, viewer (got 'emperor')", "value_error"),
    ]);
    for (const [method, path] of [
      ["PATCH", "/admin/connections/update"],
      ["DELETE", "/admin/connections/delete"],
    ]) {
      const response = await call(path, form({}, auth, method));
      expect([response.status, await response.json()], path).toEqual([
        422,
        issue(["body", "connection_id"], "Either connection_id or name must be provided", "missing"),
      ]);
    }
    const chatbot = await call("/chatbots/create", form({ name: "only a name" }, auth));
    expect([chatbot.status, await chatbot.json()]).toEqual([
      422,
      issue(
        ["body", "pipeline"],
        "give either pipeline.id, or knowledge_base_ids, a system_prompt and optionally a model",
        "missing",
      ),
    ]);
    // Group A keeps its own shape for the same service check.
    const groupA = await call("/v1/chatbot", json({ name: "only a name" }, bearer(org.owner.apiKey)));
    expect([groupA.status, await groupA.json()]).toEqual([
      400,
      {
        status: "failed",
        error: "give either pipeline.id, or knowledge_base_ids, a system_prompt and optionally a model",
      },
    ]);
  });
});
