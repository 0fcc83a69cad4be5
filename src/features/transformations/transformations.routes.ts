import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { CreatedId, Success } from "../../lib/response-schemas";
import { TransformationFetched, TransformationList, TransformationRunResult } from "./transformations.responses";
import { FetchQuery, ListQuery, listEnvelope } from "../../lib/ownership";
import { TransformationCreateBody, TransformationParams, TransformationRunBody } from "./transformations.schemas";
import {
  createTransformation,
  deleteTransformation,
  getTransformation,
  listTransformations,
  runTransformationWithLogs,
} from "./transformations.service";

export function registerTransformationRoutes(app: OpenAPIHono<AppBindings>): void {
  const tags = ["Transformations"];
  const common = { group: "A" as const, auth: "api_key" as const, tags };

  defineRoute(
    app,
    {
      ...common,
      method: "post",
      path: "/v1/transformation",
      response: CreatedId,
      summary: "Create a transformation",
      description:
        "Checks, without running it, that the source parses and defines `function_name`, and that both schemas are valid.",
      body: TransformationCreateBody,
      responses: { 403: "Viewers cannot create", 409: "Name taken by another of your transformations" },
    },
    async (c, { body }) => c.json({ status: "success", id: await createTransformation(c.env, c.get("auth"), body) }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "get",
      path: "/v1/transformation",
      response: TransformationFetched,
      summary: "Fetch a transformation by id or name",
      query: FetchQuery,
      responses: { 404: "No such transformation" },
    },
    async (c, { query }) => c.json({ status: "success", object: await getTransformation(c.env, c.get("auth"), query) }),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "get",
      path: "/v1/transformations",
      response: TransformationList,
      summary: "List transformations",
      query: ListQuery,
    },
    async (c, { query }) =>
      c.json(listEnvelope(await listTransformations(c.env, c.get("auth"), query.include_shared), query.verbose)),
  );

  defineRoute(
    app,
    {
      ...common,
      method: "delete",
      path: "/v1/transformation/:id",
      response: Success,
      summary: "Delete a transformation",
      params: TransformationParams,
      responses: { 403: "Not yours to delete", 404: "No such transformation" },
    },
    async (c, { params }) => {
      await deleteTransformation(c.env, c.get("auth"), params.id);
      return c.json({ status: "success" });
    },
  );

  defineRoute(
    app,
    {
      ...common,
      method: "post",
      path: "/v1/transformation/:id/run",
      response: TransformationRunResult,
      summary: "Run a transformation on inputs",
      description:
        "Runs the function in a fresh sandboxed interpreter (QuickJS or MicroPython in WebAssembly) with an instruction budget, a memory cap, a stack cap and an output cap; exceeding any is a 400. What the function prints (`console.log` and friends, Python `print`) comes back as `logs`, one string per line (at most 100 lines, 16 KiB), when there is any.",
      params: TransformationParams,
      body: TransformationRunBody,
      responses: { 404: "No such transformation" },
    },
    async (c, { params, body }) => {
      const { result, logs } = await runTransformationWithLogs(c.env, c.get("auth"), params.id, body.inputs);
      return c.json({ status: "success", result, ...(logs.length ? { logs } : {}) });
    },
  );
}
