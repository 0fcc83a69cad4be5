import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { Success } from "../../lib/response-schemas";
import { AuditResult, OwnerChangeResult, UserResult, UsersResult } from "./admin.responses";
import { listAudit } from "../audit/audit.service";
import { AddUserBody, AuditQuery, ChangeOwnerBody, ChangeUserBody, DeleteUserBody } from "./admin.schemas";
import { addUser, changeOwner, changeUser, deleteUser, listUsers } from "./admin.service";

export function registerAdminRoutes(app: OpenAPIHono<AppBindings>): void {
  const base = { group: "B", auth: "bearer", minRole: "admin", tags: ["Administration"] } as const;

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/admin/users",
      response: UsersResult,
      summary: "List the users of your organization",
    },
    async (c) => c.json({ status: "success", users: await listUsers(c.env, c.get("auth")) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/admin/users/add",
      response: UserResult,
      summary: "Add a user to your organization",
      body: AddUserBody,
      responses: { 409: "Email or username taken" },
    },
    async (c, { body }) => c.json({ status: "success", user: await addUser(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/admin/users",
      response: Success,
      summary: "Remove a user (never the owner); their keys and tokens stop working at once",
      body: DeleteUserBody,
      responses: { 403: "The owner cannot be removed", 404: "No such user in your organization" },
    },
    async (c, { body }) => {
      await deleteUser(c.env, c.get("auth"), body.user_id);
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "put",
      path: "/admin/users/change",
      response: UserResult,
      summary: "Change a user's role, name or suspension",
      body: ChangeUserBody,
      responses: { 403: "The owner cannot be demoted or suspended", 404: "No such user in your organization" },
    },
    async (c, { body }) => c.json({ status: "success", user: await changeUser(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...base,
      minRole: "owner",
      method: "put",
      path: "/admin/owner/change",
      response: OwnerChangeResult,
      summary: "Hand ownership to another member; you become admin",
      body: ChangeOwnerBody,
      responses: { 403: "Only the owner", 404: "No such user in your organization" },
    },
    async (c, { body }) => c.json({ status: "success", ...(await changeOwner(c.env, c.get("auth"), body.user_id)) }),
  );

  defineRoute(
    app,
    {
      ...base,
      minRole: "owner",
      method: "get",
      path: "/admin/audit-log",
      response: AuditResult,
      summary: "Every administrative action in your organization, newest first (owner only)",
      query: AuditQuery,
    },
    async (c, { query }) =>
      c.json({ status: "success", entries: await listAudit(c.env, c.get("auth"), query.limit, query.before) }),
  );
}
