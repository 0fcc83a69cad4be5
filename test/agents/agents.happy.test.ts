import { describe, expect, it } from "vitest";
import { call } from "../helpers";
import { seedOrg } from "../helpers";
import { addAgent, get, send, type Json } from "./agents-helpers";

describe("agents: happy paths", () => {
  it("creates agents, lists mine, duplicates under a new name, deletes", async () => {
    const org = await seedOrg();
    const token = org.owner.token;
    const agent = await addAgent(token, { name: "wing-expert" });
    expect(agent).toMatchObject({
      name: "wing-expert",
      config: { instructions: "be brief" },
      tags: ["aero"],
      published: false,
      ownerId: org.owner.userId,
    });
    const [, mine] = await get("/agents/my", token);
    expect((mine as Json[]).map((a) => a._id)).toEqual([agent._id]);

    const [status, dup] = await send("/agents/duplicate", token, "POST", {
      agent_id: String(agent._id),
      name: "wing-expert-2",
      description: "A copy",
    });
    expect(status).toBe(200);
    expect(dup.agent).toMatchObject({
      name: "wing-expert-2",
      description: "A copy",
      sourceAgentId: agent._id,
      config: { instructions: "be brief" },
    });

    expect((await send("/agents/delete", token, "DELETE", { agent_id: String(agent._id) }))[0]).toBe(200);
    const [, after] = await get("/agents/my", token);
    expect((after as Json[]).map((a) => a.name)).toEqual(["wing-expert-2"]);
    const [, history] = await get("/agents/history", token);
    expect((history as Json[]).map((h) => h.action)).toEqual(["deleted", "duplicated", "created"]);
  });

  it("shares an agent with a member, who lists it, copies it, and drops it", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const agent = await addAgent(org.owner.token);
    const [shareStatus, shared] = await send("/agents/share", org.owner.token, "POST", {
      agent_id: String(agent._id),
      emails: member.email,
    });
    expect([shareStatus, shared.shared_with]).toEqual([200, [member.userId]]);

    const [, list] = await send("/agents/shared", member.token, "POST");
    expect((list as unknown as Json[]).map((a) => a._id)).toEqual([agent._id]);
    const [, all] = await get("/agents", member.token);
    expect(((all as Json).agents as Json[]).find((a) => a._id === agent._id)).toMatchObject({ sharedWithMe: true });

    const [copyStatus, copy] = await send("/agents/shared/add-to-agents", member.token, "POST", {
      agent_id: String(agent._id),
    });
    expect(copyStatus).toBe(200);
    expect(copy.agent).toMatchObject({ ownerId: member.userId, sourceAgentId: agent._id });

    expect((await send("/agents/shared/remove", member.token, "DELETE", { agent_id: String(agent._id) }))[0]).toBe(200);
    const [, afterDrop] = await send("/agents/shared", member.token, "POST");
    expect(afterDrop).toEqual([]);
  });

  it("publishes to a marketplace other organizations browse, favorite and import; unpublishes", async () => {
    const author = await seedOrg();
    const visitor = await seedOrg();
    const agent = await addAgent(author.owner.token, {
      name: "market-agent",
      config: { instructions: "cite sources" },
    });
    const [pubStatus, published] = await send("/agents/publish", author.owner.token, "POST", {
      agent_id: String(agent._id),
      category: "research",
    });
    expect(pubStatus).toBe(200);
    expect(published.agent).toMatchObject({ published: true, category: "research" });

    const [, market] = await get("/agents/published", visitor.owner.token);
    const listing = (market as Json[]).find((a) => a._id === agent._id);
    expect(listing).toMatchObject({ name: "market-agent", category: "research", favorites: 0, imports: 0 });
    expect(listing).not.toHaveProperty("config");

    // The public page needs no sign-in.
    const page = await call(`/agents/id/${String(agent._id)}`);
    expect(page.status).toBe(200);
    expect(await page.json()).toMatchObject({ _id: agent._id, name: "market-agent" });

    expect((await send(`/agents/favorites/add?agent_id=${String(agent._id)}`, visitor.owner.token, "POST"))[0]).toBe(
      200,
    );
    const [, favorites] = await get("/agents/favorites/", visitor.owner.token);
    expect(((favorites as Json).favorites as Json[]).map((a) => a._id)).toEqual([agent._id]);

    const imported = await call(`/agents/imported/add?agent_id=${String(agent._id)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${visitor.owner.token}`, "content-type": "application/x-www-form-urlencoded" },
      body: "name=my-copy",
    });
    expect(imported.status).toBe(200);
    const copy = ((await imported.json()) as { agent: Json }).agent;
    expect(copy).toMatchObject({
      name: "my-copy",
      orgId: visitor.orgId,
      ownerId: visitor.owner.userId,
      sourceAgentId: agent._id,
      config: { instructions: "cite sources" },
    });
    const [, importedList] = await get("/agents/imported/", visitor.owner.token);
    expect(((importedList as Json).agents as Json[]).map((a) => a._id)).toEqual([copy._id]);
    const [, counted] = await get("/agents/published", visitor.owner.token);
    expect((counted as Json[]).find((a) => a._id === agent._id)).toMatchObject({ favorites: 1, imports: 1 });

    expect(
      (await send("/agents/imported/remove", visitor.owner.token, "DELETE", { agent_id: String(agent._id) }))[0],
    ).toBe(200);
    expect(
      (await send(`/agents/favorites/remove?agent_id=${String(agent._id)}`, visitor.owner.token, "DELETE"))[0],
    ).toBe(200);

    expect(
      (
        await send(`/agents/unpublish/${String(agent._id)}?agent_id=${String(agent._id)}`, author.owner.token, "DELETE")
      )[0],
    ).toBe(200);
    expect((await call(`/agents/id/${String(agent._id)}`)).status).toBe(404);
  });
});
