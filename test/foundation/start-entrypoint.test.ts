import { describe, expect, it } from "vitest";
import { createExecutionContext, env } from "cloudflare:test";
import { LoomHttp } from "../../src/index";
import type { Env } from "../../src/env";
import { call, seedOrg } from "../helpers";

/** A request through the `LoomHttp` entrypoint, the one `npm start`'s port leads to (scripts/start.mjs). */
function callStart(path: string, init: RequestInit = {}): Promise<Response> {
  const entry = new LoomHttp(createExecutionContext(), env as Env);
  return Promise.resolve(entry.fetch(new Request(`http://loom.test${path}`, init)));
}

/** What a response says, without the per-request id. */
async function shape(response: Response): Promise<{ status: number; headers: [string, string][]; body: string }> {
  const headers = [...response.headers].filter(([name]) => name !== "x-request-id");
  return { status: response.status, headers, body: await response.text() };
}

describe("npm start's LoomHttp entrypoint", () => {
  it("answers exactly as the Worker's default entry: page, hardening headers, errors", async () => {
    for (const [path, init] of [
      ["/", { headers: { accept: "*/*" } }],
      ["/v1/knowledge-bases", {}],
      ["/v1/knowledge-bases", { headers: { authorization: "Bearer sk_not_a_key" } }],
      ["/no/such/route", {}],
    ] as const) {
      expect(await shape(await callStart(path, init))).toEqual(await shape(await call(path, init)));
    }
  });

  it("authenticates and answers a /v1 route like the default entry", async () => {
    const org = await seedOrg();
    const init = { headers: { authorization: `Bearer ${org.owner.apiKey}` } };
    const viaStart = await callStart("/v1/knowledge-bases", init);
    expect(viaStart.status).toBe(200);
    expect(viaStart.headers.get("x-request-id")).toBeTruthy();
    expect(await viaStart.json()).toEqual(await (await call("/v1/knowledge-bases", init)).json());
  });
});
