import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { Success } from "../../lib/response-schemas";
import { ConnectionResult, ConnectionsResult } from "../admin/admin.responses";
import { ConnectionCreateBody, ConnectionDeleteBody, ConnectionUpdateBody } from "./connections.schemas";
import { createConnection, deleteConnection, listConnections, updateConnection } from "./connections.service";

export function registerConnectionRoutes(app: OpenAPIHono<AppBindings>): void {
  const base = { group: "B", auth: "bearer", minRole: "admin", tags: ["Administration"] } as const;

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/admin/connections",
      response: ConnectionsResult,
      summary: "List the organization's connections (secrets are never shown)",
    },
    async (c) => c.json({ status: "success", connections: await listConnections(c.env, c.get("auth")) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/admin/connections/create",
      response: ConnectionResult,
      summary: "Add a connection to an outside service (model provider, reranker, telephony, chat workspace)",
      body: ConnectionCreateBody,
      responses: { 409: "Name taken" },
    },
    async (c, { body }) =>
      c.json({ status: "success", connection: await createConnection(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "patch",
      path: "/admin/connections/update",
      response: ConnectionResult,
      summary: "Change a connection; a new secret replaces the old one",
      body: ConnectionUpdateBody,
      responses: { 404: "No such connection", 409: "Name taken" },
    },
    async (c, { body }) =>
      c.json({ status: "success", connection: await updateConnection(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/admin/connections/delete",
      response: Success,
      summary: "Remove a connection",
      body: ConnectionDeleteBody,
      responses: { 404: "No such connection" },
    },
    async (c, { body }) => {
      await deleteConnection(c.env, c.get("auth"), body);
      return c.json({ status: "success" });
    },
  );
}
