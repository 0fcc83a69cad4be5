import { describe, expect, it } from "vitest";
import { call, seedOrg } from "../helpers";
import { addAgent, get, send } from "./agents-helpers";

describe("agents: security", () => {
  it("another organization's unpublished agent is a 404 on every route", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const agent = await addAgent(theirs.owner.token, { config: { instructions: "CANARY-private-instructions" } });
    const id = String(agent._id);
    const t = mine.owner.token;
    const notFound = { detail: "agent not found" };
    expect(await send("/agents/delete", t, "DELETE", { agent_id: id })).toEqual([404, notFound]);
    expect(await send("/agents/duplicate", t, "POST", { agent_id: id, name: "stolen", description: "x" })).toEqual([404, notFound]);
    expect(await send("/agents/publish", t, "POST", { agent_id: id })).toEqual([404, notFound]);
    expect(await send("/agents/share", t, "POST", { agent_id: id, user_ids: mine.owner.userId })).toEqual([404, notFound]);
    expect(await send(`/agents/favorites/add?agent_id=${id}`, t, "POST")).toEqual([404, notFound]);
    expect(await send(`/agents/unpublish/${id}?agent_id=${id}`, t, "DELETE")).toEqual([404, notFound]);
    expect(await send("/agents/shared/add-to-agents", t, "POST", { agent_id: id })).toEqual([404, notFound]);
    expect((await call(`/agents/id/${id}`)).status).toBe(404);
    for (const path of ["/agents", "/agents/my", "/agents/published", "/agents/favorites/", "/agents/history"]) {
      expect(JSON.stringify((await get(path, t))[1]), path).not.toContain(id);
    }
  });

  it("a published agent is readable by others but not changeable, and its public page leaks no config", async () => {
    const author = await seedOrg();
    const other = await seedOrg();
    const agent = await addAgent(author.owner.token, { config: { instructions: "CANARY-config-9d2f" } });
    const id = String(agent._id);
    await send("/agents/publish", author.owner.token, "POST", { agent_id: id });
    expect(await send("/agents/delete", other.owner.token, "DELETE", { agent_id: id })).toEqual([404, { detail: "agent not found" }]);
    expect(await send("/agents/publish", other.owner.token, "POST", { agent_id: id })).toEqual([404, { detail: "agent not found" }]);
    const page = await (await call(`/agents/id/${id}`)).text();
    expect(page).not.toContain("CANARY-config-9d2f");
    expect(page).not.toContain(author.owner.email);
    expect(JSON.stringify((await get("/agents/published", other.owner.token))[1])).not.toContain("CANARY-config-9d2f");
  });

  it("sharing never reaches users of another organization", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const agent = await addAgent(mine.owner.token);
    const [status] = await send("/agents/share", mine.owner.token, "POST", { agent_id: String(agent._id), user_ids: theirs.owner.userId });
    expect(status).toBe(404);
    const [, shared] = await send("/agents/shared", theirs.owner.token, "POST");
    expect(shared).toEqual([]);
  });

  it("agent routes need a credential", async () => {
    const response = await call("/agents/my");
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ detail: "Not authenticated" });
  });
});
