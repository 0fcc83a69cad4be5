import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { expect } from "vitest";
import type { Env } from "../../src/env";
import worker from "../../src/index";
import { bearer, call, json, type Member, type Org } from "../helpers";

/** Adds a user with `role` to `org` through the admin API. */
export function addMember(org: Org, role: "admin" | "member" | "viewer"): Promise<Member> {
  return org.addMember(role);
}

export const DOUBLE_JS = "function double({ x }) {\n  return { y: x * 2 };\n}\n";
export const DOUBLE_PY = "def double(x):\n    return {'y': x * 2}\n";

export interface TransformationBody {
  name?: string;
  description?: string;
  function_name?: string;
  function?: string;
  language?: string;
  input_schema?: unknown;
  output_schema?: unknown;
  inputs?: unknown;
  outputs?: unknown;
}

let counter = 0;
export function uniqueName(prefix = "t"): string {
  counter += 1;
  return `${prefix}-${Date.now().toString(36)}-${counter}`;
}

export function createRaw(member: Member, body: TransformationBody): Promise<Response> {
  return call("/v1/transformation", json(body, bearer(member.apiKey)));
}

/** Creates a transformation that must be accepted; answers its id. */
export async function create(member: Member, body: TransformationBody): Promise<string> {
  const response = await createRaw(member, { name: uniqueName(), description: "test", ...body });
  const payload = (await response.json()) as { status: string; id: string };
  expect(response.status, JSON.stringify(payload)).toBe(200);
  expect(payload.status).toBe("success");
  return payload.id;
}

export const createDoubleJs = (member: Member) =>
  create(member, {
    function_name: "double",
    function: DOUBLE_JS,
    language: "javascript",
    input_schema: { x: "number" },
    output_schema: { y: "number" },
  });
export const createDoublePy = (member: Member) =>
  create(member, {
    function_name: "double",
    function: DOUBLE_PY,
    input_schema: { x: "number" },
    output_schema: { y: "number" },
  });

export function runRaw(member: Member, id: string, inputs: unknown): Promise<Response> {
  return call(`/v1/transformation/${id}/run`, json({ inputs }, bearer(member.apiKey)));
}

export async function run(
  member: Member,
  id: string,
  inputs: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await runRaw(member, id, inputs);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export const get = (member: Member, query: string) =>
  call(`/v1/transformation?${query}`, { headers: bearer(member.apiKey) });
export const list = (member: Member, query = "") =>
  call(`/v1/transformations${query ? `?${query}` : ""}`, { headers: bearer(member.apiKey) });
export const remove = (member: Member, id: string) =>
  call(`/v1/transformation/${id}`, { method: "DELETE", headers: bearer(member.apiKey) });

/** Sends a request through the real Worker with some of its vars or bindings changed (placement, limits). */
export async function callWith(overrides: Partial<Env>, path: string, init: RequestInit = {}): Promise<Response> {
  const context = createExecutionContext();
  const response = await worker.fetch(new Request(`http://loom.test${path}`, init), { ...env, ...overrides }, context);
  await waitOnExecutionContext(context);
  return response;
}

/** Creates (must succeed) and runs transformations under changed vars; answers status and body. */
export function placedAt(overrides: Partial<Env>) {
  return {
    async create(member: Member, body: TransformationBody): Promise<string> {
      const response = await callWith(
        overrides,
        "/v1/transformation",
        json({ name: uniqueName(), description: "test", ...body }, bearer(member.apiKey)),
      );
      const payload = (await response.json()) as { id: string };
      expect(response.status, JSON.stringify(payload)).toBe(200);
      return payload.id;
    },
    async run(member: Member, id: string, inputs: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
      const response = await callWith(
        overrides,
        `/v1/transformation/${id}/run`,
        json({ inputs }, bearer(member.apiKey)),
      );
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
  };
}
