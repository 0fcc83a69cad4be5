import { describe, expect, it } from "vitest";
import { bearer, call, json, seedOrg } from "../helpers";
import { createKb, indexText } from "../knowledge-bases/kb-fixtures";
import { SMALLEST, createPipeline } from "../pipelines/fixtures";
import { createDoubleJs } from "../transformations/fixtures";
import { checkResponse, openApiDoc, type JsonSchema, type OpenApiDoc } from "./openapi-contract";

/*
 * Issue 12: a client generated from /openapi.json must read a record's own fields typed. Each
 * record below is fetched for real; its body must validate against the documented schema, and
 * every field it carries must be declared by its named component (so none is typed `unknown`).
 */

type Schema = JsonSchema & { $ref?: string; properties?: Record<string, unknown>; allOf?: Schema[] };

/** The component's declared property names, following $ref and allOf (zod's extend). */
function declared(doc: OpenApiDoc, schema: Schema): Set<string> {
  if (schema.$ref) return declared(doc, doc.components.schemas[schema.$ref.split("/").pop() ?? ""] as Schema);
  const own = Object.keys(schema.properties ?? {});
  return new Set([...own, ...(schema.allOf ?? []).flatMap((part) => [...declared(doc, part)])]);
}

function undeclaredFields(doc: OpenApiDoc, component: string, record: Record<string, unknown>): string[] {
  const known = declared(doc, { $ref: `#/components/schemas/${component}` });
  expect(known.size, component).toBeGreaterThan(3);
  return Object.keys(record).filter((key) => !known.has(key));
}

async function fetchChecked(doc: OpenApiDoc, path: string, concrete: string, key: string): Promise<unknown> {
  const response = await call(concrete, { headers: bearer(key) });
  const copy = response.clone();
  expect(await checkResponse(doc, "get", path, response, concrete)).toEqual([]);
  expect(copy.status, concrete).toBe(200);
  return copy.json();
}

type Fetched = { object: Record<string, unknown> };
type Listed = { objects: Record<string, unknown>[] };

describe("records in responses are typed components (issue 12)", () => {
  it("knowledge bases, their documents, pipelines and transformations: every field declared and the body valid", async () => {
    const doc = await openApiDoc();
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKb(key);
    await indexText(key, kbId, "a.txt", "Loom types every record.");
    const pipelineId = await createPipeline(key, SMALLEST);
    const transformationId = await createDoubleJs(org.owner);

    const kb = (await fetchChecked(doc, "/v1/knowledge-base", `/v1/knowledge-base?id=${kbId}`, key)) as Fetched;
    expect(undeclaredFields(doc, "KnowledgeBaseDetail", kb.object)).toEqual([]);
    const kbs = (await fetchChecked(doc, "/v1/knowledge-bases", "/v1/knowledge-bases?verbose=true", key)) as Listed;
    expect(kbs.objects.length).toBeGreaterThan(0);
    for (const record of kbs.objects) expect(undeclaredFields(doc, "KnowledgeBase", record)).toEqual([]);

    const docs = (await fetchChecked(
      doc,
      "/v1/knowledge-base/{id}/documents",
      `/v1/knowledge-base/${kbId}/documents`,
      key,
    )) as { documents: Record<string, unknown>[] };
    expect(docs.documents.length).toBe(1);
    expect(undeclaredFields(doc, "KnowledgeBaseDocument", docs.documents[0])).toEqual([]);

    const pipeline = (await fetchChecked(doc, "/v1/pipeline", `/v1/pipeline?id=${pipelineId}`, key)) as Fetched;
    expect(undeclaredFields(doc, "Pipeline", pipeline.object)).toEqual([]);
    const pipelines = (await fetchChecked(doc, "/v1/pipelines", "/v1/pipelines?verbose=true", key)) as Listed;
    expect(pipelines.objects.length).toBeGreaterThan(0);
    for (const record of pipelines.objects) expect(undeclaredFields(doc, "Pipeline", record)).toEqual([]);

    const run = await call(`/v1/pipeline/${pipelineId}/run`, json({ inputs: { q: "world" } }, bearer(key)));
    const runId = String(((await run.json()) as { run_id: string }).run_id);
    const status = (await fetchChecked(
      doc,
      "/v1/pipeline/{id}/run/status/{run_id}",
      `/v1/pipeline/${pipelineId}/run/status/${runId}`,
      key,
    )) as { nodes: Record<string, unknown>[] };
    expect(status.nodes.length).toBe(3);
    for (const node of status.nodes) expect(undeclaredFields(doc, "PipelineRunNode", node)).toEqual([]);

    const transformation = (await fetchChecked(
      doc,
      "/v1/transformation",
      `/v1/transformation?id=${transformationId}`,
      key,
    )) as Fetched;
    expect(undeclaredFields(doc, "Transformation", transformation.object)).toEqual([]);
    const transformations = (await fetchChecked(
      doc,
      "/v1/transformations",
      "/v1/transformations?verbose=true",
      key,
    )) as Listed;
    expect(transformations.objects.length).toBeGreaterThan(0);
    for (const record of transformations.objects) expect(undeclaredFields(doc, "Transformation", record)).toEqual([]);
  }, 120_000);

  it("an agent (v1 fetch): every field declared and the body valid", async () => {
    const doc = await openApiDoc();
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKb(key);
    const created = await call(
      "/v1/agent",
      json(
        {
          name: "typed agent",
          instructions: "Answer from the tools.",
          llm_client_key: { provider: "loom", model_id: "extractive" },
          inputs: { input_1: { name: "question", io_type: "string" } },
          outputs: { output_1: { name: "answer", io_type: "string" } },
          tools: [
            {
              name: "kb_tool",
              description: "",
              value: { node_type: "knowledge_base", inputs: { knowledge_base: { type: "string", value: kbId } } },
            },
          ],
        },
        bearer(key),
      ),
    );
    const answer = (await created.json()) as { id: string };
    expect(created.status, JSON.stringify(answer)).toBe(200);
    const agent = (await fetchChecked(doc, "/v1/agent", `/v1/agent?id=${answer.id}`, key)) as Fetched;
    expect((agent.object.tools as unknown[]).length).toBe(1);
    expect(undeclaredFields(doc, "AgentV1", agent.object)).toEqual([]);
  }, 120_000);

  it("query result items and citations: every field declared, in each retrieval unit", async () => {
    const doc = await openApiDoc();
    const org = await seedOrg();
    const key = org.owner.apiKey;
    const kbId = await createKb(key);
    await indexText(key, kbId, "a.txt", "Loom types every record. Rockets carry their oxidiser.");
    const path = "/v1/knowledge-base/{id}/query";
    for (const unit of ["chunk", "documents", "page"]) {
      const concrete = `/v1/knowledge-base/${kbId}/query`;
      const response = await call(
        concrete,
        json(
          {
            queries: ["rockets"],
            config: {
              retrieval_unit: unit,
              format_context_for_llm: true,
              retrieval_config: { search_mode: "keyword" },
            },
          },
          bearer(key),
        ),
      );
      const copy = response.clone();
      expect(await checkResponse(doc, "post", path, response, `${concrete} ${unit}`)).toEqual([]);
      const result = ((await copy.json()) as { result: Record<string, unknown> }).result;
      const items = (result.chunks ?? result.documents ?? result.pages) as Record<string, unknown>[];
      expect(items.length, unit).toBeGreaterThan(0);
      for (const item of items) expect(undeclaredFields(doc, "KnowledgeBaseResultItem", item)).toEqual([]);
      const citations = result.citation_metadata as Record<string, unknown>[];
      expect(citations.length, unit).toBeGreaterThan(0);
      for (const cite of citations) expect(undeclaredFields(doc, "KnowledgeBaseCitation", cite)).toEqual([]);
    }
  }, 120_000);

  it("the fetch and list envelopes of these resources point at their typed records, not a free-form one", async () => {
    const doc = await openApiDoc();
    const expected: [string, string][] = [
      ["/v1/knowledge-base", "KnowledgeBaseFetched"],
      ["/v1/knowledge-bases", "KnowledgeBaseList"],
      ["/v1/pipeline", "PipelineFetched"],
      ["/v1/pipelines", "PipelineList"],
      ["/v1/transformation", "TransformationFetched"],
      ["/v1/transformations", "TransformationList"],
      ["/v1/agent", "AgentV1Fetched"],
    ];
    for (const [path, component] of expected) {
      const schema = doc.paths[path].get.responses["200"].content?.["application/json"]?.schema as Schema;
      expect(schema.$ref, path).toBe(`#/components/schemas/${component}`);
    }
  });
});
