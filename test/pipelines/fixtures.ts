import { env } from "cloudflare:test";
import type { Env } from "../../src/env";
import { runStub } from "../../src/features/pipelines/pipeline-runs.service";
import { productionNodeServices, type NodeServices } from "../../src/features/pipelines/pipeline-services";
import { bearer, call, json } from "../helpers";
import { useDeps } from "../test-deps";

export const SMALLEST = {
  nodes: [
    { id: "in", type: "input", config: { name: "q", type: "text" } },
    { id: "greet", type: "text", config: { text: "Hello {{in}}" } },
    { id: "out", type: "output", config: { name: "answer", value: "{{greet}}" } },
  ],
  edges: [
    { source: "in", target: "greet" },
    { source: "greet", target: "out" },
  ],
};

export const WITH_APPROVAL = {
  nodes: [
    { id: "in", type: "input", config: { name: "q", type: "text" } },
    { id: "gate", type: "approval", config: {} },
    { id: "greet", type: "text", config: { text: "Hello {{in}}" } },
    { id: "out", type: "output", config: { name: "answer", value: "{{greet}}" } },
  ],
  edges: [
    { source: "in", target: "gate" },
    { source: "gate", target: "greet" },
    { source: "greet", target: "out" },
  ],
};

let n = 0;
/** A run that stays in progress (sleeping) until someone pauses or terminates it. */
export const NAP = {
  nodes: [
    { id: "in", type: "input", config: { name: "q" } },
    { id: "nap", type: "wait", config: { seconds: 600 } },
    { id: "out", type: "output", config: { name: "answer", value: "{{nap}}" } },
  ],
  edges: [
    { source: "in", target: "nap" },
    { source: "nap", target: "out" },
  ],
};

export const uniqueName = (prefix = "p"): string =>
  `${prefix}-${Date.now().toString(36)}-${++n}-${Math.random().toString(36).slice(2, 6)}`;

export type Body = Record<string, unknown>;

export async function send(
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Body }> {
  const init: RequestInit =
    body === undefined ? { method, headers: bearer(key) } : { ...json(body, bearer(key)), method };
  const response = await call(path, init);
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Body) : {} };
}

export async function createPipeline(key: string, definition: Body, name = uniqueName()): Promise<string> {
  const created = await send(key, "POST", "/v1/pipeline", { name, description: "test", ...definition });
  if (created.status !== 200) throw new Error(`create failed: ${created.status} ${JSON.stringify(created.body)}`);
  return String(created.body.id);
}

/**
 * Reads the status route until the run leaves in_progress (or `until` holds). Between reads it
 * waits on the run object itself (`waitForChange` answers when the run's version moves), so no
 * timer orders anything; the attempt count and the RPC's timeout only bound how long a run that
 * never gets there takes to fail.
 */
export async function waitForRun(
  key: string,
  pipelineId: string,
  runId: string,
  until: (status: string) => boolean = (s) => s !== "in_progress",
): Promise<Body> {
  const stub = runStub(env, runId);
  for (let i = 0; i < 600; i++) {
    // The version is read before the route, so a change between the two wakes the wait at once.
    const known = (await stub.status())?.version ?? -1;
    const status = await send(key, "GET", `/v1/pipeline/${pipelineId}/run/status/${runId}`);
    if (until(String(status.body.status))) return status.body;
    await stub.waitForChange(known, 5_000);
  }
  throw new Error(`run ${runId} did not settle`);
}

/** In-test services for the nodes whose real implementations live in other features. */
export function fakeServices(env: Env, overrides: Partial<NodeServices> = {}): NodeServices {
  const production = productionNodeServices(env, {});
  return {
    async chat(_auth, request) {
      const last = request.messages[request.messages.length - 1];
      const system = request.messages.find((m) => m.role === "system");
      return {
        text: `${system ? `[${system.content}] ` : ""}echo: ${last.content}`,
        model: request.model ?? "fake/echo",
      };
    },
    async queryKnowledgeBase(_auth, knowledgeBaseId, query) {
      return {
        text: `[1] about ${query}`,
        results: [{ id: "c1", document_id: "d1", score: 1, text: `about ${query}`, metadata: { kb: knowledgeBaseId } }],
      };
    },
    async runTransformation(_auth, _id, inputs) {
      return { sum: Number(inputs.a) + Number(inputs.b) };
    },
    async checkKnowledgeBase() {
      return null;
    },
    async checkTransformation() {
      return null;
    },
    runPipeline: production.runPipeline,
    ...overrides,
  };
}

/**
 * Makes the app's definition checks and new run objects use these services until the returned
 * function is called (test/worker.ts builds both with them).
 */
export function useServices(make: (env: Env) => NodeServices): () => void {
  return useDeps(() => ({ nodeServices: make }));
}
