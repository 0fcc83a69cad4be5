import { describe, expect, it } from "vitest";
import { seedOrg } from "../helpers";
import { addAgent, send } from "./agents-helpers";

describe("agents: documented failures", () => {
  it("answers 409 for a taken name, 422 for missing fields, 404 for unknown agents", async () => {
    const org = await seedOrg();
    await addAgent(org.owner.token, { name: "dup" });
    expect(await send("/agents/add", org.owner.token, "POST", { name: "dup" })).toEqual([
      409,
      { detail: "you already have an agent named 'dup'" },
    ]);
    const [status, body] = await send("/agents/duplicate", org.owner.token, "POST", {
      agent_id: "aaaaaaaaaaaaaaaaaaaaaaaa",
    });
    expect(status).toBe(422);
    expect((body.detail as { loc: string[] }[]).map((d) => d.loc.join("."))).toEqual(["body.name", "body.description"]);
    expect(await send("/agents/delete", org.owner.token, "DELETE", { agent_id: "aaaaaaaaaaaaaaaaaaaaaaaa" })).toEqual([
      404,
      { detail: "agent not found" },
    ]);
    expect(await send("/agents/favorites/remove?agent_id=aaaaaaaaaaaaaaaaaaaaaaaa", org.owner.token, "DELETE")).toEqual(
      [404, { detail: "favorite not found" }],
    );
  });

  it("refuses to unpublish an agent that is not published, or through the wrong pipeline id", async () => {
    const org = await seedOrg();
    const agent = await addAgent(org.owner.token);
    const id = String(agent._id);
    expect(await send(`/agents/unpublish/${id}?agent_id=${id}`, org.owner.token, "DELETE")).toEqual([
      400,
      { detail: "agent_id: the agent is not published" },
    ]);
    expect(await send(`/agents/unpublish/bbbbbbbbbbbbbbbbbbbbbbbb?agent_id=${id}`, org.owner.token, "DELETE")).toEqual([
      404,
      { detail: "agent with that pipeline not found" },
    ]);
  });

  it("importing needs a published agent; sharing needs known users", async () => {
    const org = await seedOrg();
    const agent = await addAgent(org.owner.token);
    expect(await send(`/agents/imported/add?agent_id=${String(agent._id)}`, org.owner.token, "POST", {})).toEqual([
      404,
      { detail: "published agent not found" },
    ]);
    expect(await send("/agents/share", org.owner.token, "POST", { agent_id: String(agent._id) })).toEqual([
      422,
      {
        detail: [
          {
            loc: ["body", "user_ids"],
            msg: "name at least one user (user_ids or emails) to share with",
            type: "missing",
          },
        ],
      },
    ]);
    expect(
      await send("/agents/share", org.owner.token, "POST", {
        agent_id: String(agent._id),
        emails: "ghost@example.com",
      }),
    ).toEqual([404, { detail: "user ghost@example.com not found" }]);
  });

  it("members cannot change agents they do not own; viewers create nothing", async () => {
    const org = await seedOrg();
    const member = await org.addMember("member");
    const viewer = await org.addMember("viewer");
    const agent = await addAgent(org.owner.token);
    await send("/agents/share", org.owner.token, "POST", { agent_id: String(agent._id), user_ids: member.userId });
    expect(await send("/agents/delete", member.token, "DELETE", { agent_id: String(agent._id) })).toEqual([
      403,
      { detail: "only the agent's owner or an admin can change it" },
    ]);
    expect(await send("/agents/publish", member.token, "POST", { agent_id: String(agent._id) })).toEqual([
      403,
      { detail: "only the agent's owner or an admin can change it" },
    ]);
    expect(await send("/agents/add", viewer.token, "POST", { name: "nope" })).toEqual([
      403,
      { detail: "viewers cannot create agents" },
    ]);
  });
});
