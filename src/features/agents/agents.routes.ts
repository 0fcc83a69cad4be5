import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { asStream, defineRoute } from "../../lib/route";
import { wantsHtml } from "../../lib/pages";
import { agentPage } from "./agent-page";
import {
  AgentAddBody,
  AgentDuplicateBody,
  AgentIdBody,
  AgentIdParams,
  AgentIdQuery,
  AgentImportBody,
  AgentPublishBody,
  AgentShareBody,
  AgentShareRemoveBody,
  UnpublishParams,
} from "./agents.schemas";
import {
  agentAccess,
  copyAgent,
  deleteAgent,
  insertAgent,
  listMyAgents,
  listSharedWithMe,
  removeShare,
  shareAgent,
} from "./agents.service";
import {
  addFavorite,
  importAgent,
  listFavorites,
  listHistory,
  listImported,
  listPublished,
  publicAgent,
  publishAgent,
  removeFavorite,
  removeImported,
  unpublishAgent,
} from "./agents-marketplace.service";
import { agentDescription } from "./agents.records";
import { notFound } from "../../lib/errors";
import { Success } from "../../lib/response-schemas";
import {
  AgentList,
  AgentResult,
  AgentShareResult,
  AgentsFavoritesDescription,
  AgentsHistoryList,
  AgentsResult,
  MarketplaceAgentDescription,
  MarketplaceAgentList,
} from "./agents.responses";

export function registerAgentRoutes(app: OpenAPIHono<AppBindings>): void {
  const base = { group: "B", auth: "bearer", tags: ["Agents"] } as const;
  const ok = { status: "success" as const };

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/agents",
      response: AgentsResult,
      summary: "Agents you can use: your own and those shared with you",
    },
    async (c) => {
      const auth = c.get("auth");
      return c.json({
        status: "success",
        agents: [...(await listMyAgents(c.env, auth)), ...(await listSharedWithMe(c.env, auth))],
      });
    },
  );

  defineRoute(
    app,
    { ...base, method: "get", path: "/agents/my", response: AgentList, summary: "Agents you own (AgentDescription[])" },
    async (c) => c.json(await listMyAgents(c.env, c.get("auth"))),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/add",
      response: AgentResult,
      summary: "Create an agent",
      body: AgentAddBody,
      responses: { 409: "You already have an agent with that name" },
    },
    async (c, { body }) => {
      const row = await insertAgent(
        c.env,
        c.get("auth"),
        {
          name: body.name,
          description: body.description,
          pipelineId: body.pipeline_id,
          config: body.config,
          tags: body.tags,
        },
        "created",
      );
      return c.json({ ...ok, agent: agentDescription(row) });
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/agents/delete",
      response: Success,
      summary: "Delete an agent you own (or, as an admin, one of your organization's)",
      body: AgentIdBody,
      responses: { 403: "Not yours", 404: "No such agent" },
    },
    async (c, { body }) => {
      await deleteAgent(c.env, c.get("auth"), body.agent_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/duplicate",
      response: AgentResult,
      summary: "Copy an agent you can see into your agents, under a new name and description",
      body: AgentDuplicateBody,
      responses: { 404: "No such agent", 409: "Name taken" },
    },
    async (c, { body }) => {
      const auth = c.get("auth");
      const { row } = await agentAccess(c.env, auth, body.agent_id);
      return c.json({
        ...ok,
        agent: await copyAgent(c.env, auth, row, { name: body.name, description: body.description }, "duplicated"),
      });
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/publish",
      response: AgentResult,
      summary: "Publish an agent to the marketplace",
      body: AgentPublishBody,
      responses: { 403: "Not yours", 404: "No such agent" },
    },
    async (c, { body }) => c.json({ ...ok, agent: await publishAgent(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/agents/published",
      response: MarketplaceAgentList,
      summary: "The marketplace: every published agent (MarketplaceAgentDescription[])",
    },
    async (c) => c.json(await listPublished(c.env)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/agents/unpublish/:pipeline_id",
      response: Success,
      summary: "Remove an agent from the marketplace",
      params: UnpublishParams,
      query: AgentIdQuery,
      responses: { 404: "No such agent" },
    },
    async (c, { params, query }) => {
      await unpublishAgent(c.env, c.get("auth"), query.agent_id, params.pipeline_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      group: "B",
      auth: "none",
      tags: ["Agents"],
      method: "get",
      path: "/agents/id/:agent_id",
      response: MarketplaceAgentDescription,
      summary: "A published agent's public description (no sign-in needed)",
      params: AgentIdParams,
      responses: { 404: "Not published or unknown" },
    },
    async (c, { params }) => {
      const agent = await publicAgent(c.env, params.agent_id);
      // A browser (Accept: text/html first) gets the page; API clients get the JSON as before.
      return wantsHtml(c.req.header("accept")) ? asStream(agentPage(agent)) : c.json(agent);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/agents/favorites/",
      response: AgentsFavoritesDescription,
      summary: "Your favorite agents (AgentsFavoritesDescription)",
    },
    async (c) => c.json(await listFavorites(c.env, c.get("auth"))),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/favorites/add",
      response: Success,
      summary: "Mark an agent you can see as a favorite",
      query: AgentIdQuery,
      responses: { 404: "No such agent" },
    },
    async (c, { query }) => {
      await addFavorite(c.env, c.get("auth"), query.agent_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/agents/favorites/remove",
      response: Success,
      summary: "Remove a favorite",
      query: AgentIdQuery,
      responses: { 404: "Not a favorite" },
    },
    async (c, { query }) => {
      await removeFavorite(c.env, c.get("auth"), query.agent_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/agents/imported/",
      response: AgentsResult,
      summary: "Agents you imported from the marketplace",
    },
    async (c) => c.json({ status: "success", agents: await listImported(c.env, c.get("auth")) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/imported/add",
      response: AgentResult,
      summary: "Import a marketplace agent into your agents (a copy you own)",
      query: AgentIdQuery,
      body: AgentImportBody,
      responses: { 404: "Not published", 409: "Name taken" },
    },
    async (c, { query, body }) =>
      c.json({ ...ok, agent: await importAgent(c.env, c.get("auth"), query.agent_id, body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/agents/imported/remove",
      response: Success,
      summary: "Delete an imported agent (by its id or its marketplace source's id)",
      body: AgentIdBody,
      responses: { 404: "Not imported" },
    },
    async (c, { body }) => {
      await removeImported(c.env, c.get("auth"), body.agent_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/share",
      response: AgentShareResult,
      summary: "Share an agent with users of your organization",
      body: AgentShareBody,
      responses: { 403: "Not yours", 404: "No such agent or user" },
    },
    async (c, { body }) =>
      c.json({
        ...ok,
        ...(await shareAgent(c.env, c.get("auth"), body.agent_id, body.user_ids ?? [], body.emails ?? [], body.role)),
      }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/shared",
      response: AgentList,
      summary: "Agents shared with you (AgentDescription[])",
    },
    async (c) => c.json(await listSharedWithMe(c.env, c.get("auth"))),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/agents/shared/remove",
      response: Success,
      summary: "Drop an agent shared with you, or (as its owner) remove a user's access",
      body: AgentShareRemoveBody,
      responses: { 404: "No such share" },
    },
    async (c, { body }) => {
      await removeShare(c.env, c.get("auth"), body.agent_id, body.user_id);
      return c.json(ok);
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/agents/shared/add-to-agents",
      response: AgentResult,
      summary: "Copy an agent shared with you into your own agents",
      body: AgentIdBody,
      responses: { 404: "Not shared with you", 409: "Name taken" },
    },
    async (c, { body }) => {
      const auth = c.get("auth");
      const access = await agentAccess(c.env, auth, body.agent_id);
      if (!access.sharedWithMe) throw notFound("shared agent");
      return c.json({ ...ok, agent: await copyAgent(c.env, auth, access.row, {}, "added from shared") });
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/agents/history",
      response: AgentsHistoryList,
      summary: "What you did with agents, newest first (AgentsHistoryDescription[])",
    },
    async (c) => c.json(await listHistory(c.env, c.get("auth"))),
  );
}
