import { describe, expect, it } from "vitest";
import { bearer, call, form, json, seedOrg } from "../helpers";
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
    expect(await send("/agents/duplicate", t, "POST", { agent_id: id, name: "stolen", description: "x" })).toEqual([
      404,
      notFound,
    ]);
    expect(await send("/agents/publish", t, "POST", { agent_id: id })).toEqual([404, notFound]);
    expect(await send("/agents/share", t, "POST", { agent_id: id, user_ids: mine.owner.userId })).toEqual([
      404,
      notFound,
    ]);
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
    expect(await send("/agents/delete", other.owner.token, "DELETE", { agent_id: id })).toEqual([
      404,
      { detail: "agent not found" },
    ]);
    expect(await send("/agents/publish", other.owner.token, "POST", { agent_id: id })).toEqual([
      404,
      { detail: "agent not found" },
    ]);
    const page = await (await call(`/agents/id/${id}`)).text();
    expect(page).not.toContain("CANARY-config-9d2f");
    expect(page).not.toContain(author.owner.email);
    expect(JSON.stringify((await get("/agents/published", other.owner.token))[1])).not.toContain("CANARY-config-9d2f");
  });

  it("sharing never reaches users of another organization", async () => {
    const mine = await seedOrg();
    const theirs = await seedOrg();
    const agent = await addAgent(mine.owner.token);
    const [status] = await send("/agents/share", mine.owner.token, "POST", {
      agent_id: String(agent._id),
      user_ids: theirs.owner.userId,
    });
    expect(status).toBe(404);
    const [, shared] = await send("/agents/shared", theirs.owner.token, "POST");
    expect(shared).toEqual([]);
  });

  it("a config nested past 64 levels is a 4xx in every encoding, and nothing is stored", async () => {
    const org = await seedOrg();
    const t = org.owner.token;
    const deep = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
    const asJson = await call("/agents/add", {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(t) },
      body: `{"name":"deep-json","description":"x","config":{"a":${deep}}}`,
    });
    expect(asJson.status).toBe(400);
    expect(await asJson.json()).toEqual({ detail: "request body nests deeper than 64 levels" });
    // The same config as JSON text in a form field, and as dotted form names.
    const asText = await call(
      "/agents/add",
      form({ name: "deep-text", description: "x", config: `{"a":${deep}}` }, bearer(t)),
    );
    expect(asText.status).toBe(422);
    expect(((await asText.json()) as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["body", "config"]);
    const dotted = await call(
      "/agents/add",
      form({ name: "deep-dotted", description: "x", [`config${".a".repeat(100)}`]: "1" }, bearer(t)),
    );
    expect(dotted.status).toBe(400);
    expect(await dotted.json()).toEqual({ detail: "request body nests deeper than 64 levels" });
    // Up to the limit is fine.
    const ok = await call(
      "/agents/add",
      json(
        { name: "deep-ok", description: "x", config: JSON.parse(`${'{"a":'.repeat(60)}1${"}".repeat(60)}`) },
        bearer(t),
      ),
    );
    expect(ok.status).toBe(200);
    const [, mine] = await get("/agents/my", t);
    expect((mine as { name: string }[]).map((a) => a.name)).toEqual(["deep-ok"]);
  });

  it("agent routes need a credential", async () => {
    const response = await call("/agents/my");
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ detail: "Not authenticated" });
  });
});
