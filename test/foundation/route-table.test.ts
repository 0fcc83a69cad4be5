import { describe, expect, it } from "vitest";
import { call } from "../helpers";

/** The seed's Group B table (000_cadd0c229c174a77.txt), method and path as written there. */
const SEED_GROUP_B = [
  "GET /admin/users",
  "DELETE /admin/users",
  "POST /admin/users/add",
  "PUT /admin/users/change",
  "PUT /admin/owner/change",
  "POST /admin/connections/create",
  "PATCH /admin/connections/update",
  "DELETE /admin/connections/delete",
  "GET /agents",
  "GET /agents/my",
  "POST /agents/add",
  "DELETE /agents/delete",
  "POST /agents/duplicate",
  "POST /agents/publish",
  "GET /agents/published",
  "DELETE /agents/unpublish/{pipeline_id}",
  "GET /agents/id/{agent_id}",
  "GET /agents/favorites/",
  "POST /agents/favorites/add",
  "DELETE /agents/favorites/remove",
  "GET /agents/imported/",
  "DELETE /agents/imported/remove",
  "POST /agents/imported/add",
  "POST /agents/share",
  "POST /agents/shared",
  "DELETE /agents/shared/remove",
  "POST /agents/shared/add-to-agents",
  "GET /agents/history",
  "GET /chatbots",
  "GET /chatbots/conversations",
  "GET /chatbots/conversations/{conversation_id}",
  "GET /chatbots/deployed/{chatbot_id}",
  "GET /chatbots/browser-extension-chatbots",
  "GET /chatbots/{id}",
  "POST /chatbots/create",
  "POST /chatbots/upload",
  "DELETE /chatbots/delete",
  "POST /chatbots/conversations/update/name",
  "POST /chatbots/conversations/message/like",
  "POST /chatbots/deployed/conversations/message/like",
  "DELETE /chatbots/conversations/delete",
  "POST /chatbots/deploy",
  "POST /chatbots/update/deployment",
  "POST /chatbots/update/telephony",
  "POST /chatbots/update/rbac",
  "POST /chatbots/update/chatworkspace",
  "POST /chatbots/update/access",
  "DELETE /chatbots/undeploy/{chatbot_id}",
];

/** The seed's Group A routes, under /v1. */
const SEED_GROUP_A = [
  "POST /v1/knowledge-base/{id}/query",
  "POST /v1/knowledge-base/{id}/index",
  "GET /v1/knowledge-base",
  "DELETE /v1/knowledge-base/{id}",
  "POST /v1/transformation",
  "GET /v1/transformation",
  "GET /v1/transformations",
  "DELETE /v1/transformation/{id}",
  "POST /v1/chatbot/{id}/run",
  "GET /v1/chatbot",
  "GET /v1/chatbots",
  "GET /v1/pipelines",
  "POST /v1/pipeline/{id}/resume",
  "POST /v1/pipeline/{id}/terminate",
];

/**
 * Seed routes Loom does not serve yet. Kept honest both ways: a listed route must really be
 * missing, and every other seed route must really exist, so this list is the live answer to
 * "which routes exist yet".
 */
const NOT_YET = new Set<string>([]);

async function documentedRoutes(): Promise<Set<string>> {
  const doc = (await (await call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
  const routes = new Set<string>();
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const method of Object.keys(operations)) routes.add(`${method.toUpperCase()} ${path}`);
  }
  return routes;
}

describe("route table against the seed", () => {
  it("serves and documents every seed route not marked as missing, and none marked missing", async () => {
    const routes = await documentedRoutes();
    const seed = [...SEED_GROUP_B, ...SEED_GROUP_A];
    const missing = seed.filter((r) => !routes.has(r) && !NOT_YET.has(r));
    const nowPresent = seed.filter((r) => routes.has(r) && NOT_YET.has(r));
    expect(missing, "seed routes that should exist").toEqual([]);
    expect(nowPresent, "routes that exist now: remove them from NOT_YET").toEqual([]);
    // Every route marked missing is a real seed route (a stale or misspelt entry would hide nothing).
    expect(
      [...NOT_YET].filter((r) => !seed.includes(r)),
      "NOT_YET entries that are not seed routes",
    ).toEqual([]);
  });

  it("every documented route answers (never the generic 404) and unknown paths are JSON 404s", async () => {
    const routes = await documentedRoutes();
    for (const route of routes) {
      const [method, path] = route.split(" ");
      const concrete = path.replace(/\{[^}]+\}/g, "aaaaaaaaaaaaaaaaaaaaaaaa");
      const response = await call(concrete, { method });
      const text = await response.text();
      expect(text, route).not.toContain("no route for");
    }
    const unknown = await call("/v1/nope");
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ status: "failed", error: "no route for GET /v1/nope" });
  });
});
