import type { OpenAPIHono } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import type { AppBindings } from "../../env";
import { FetchQuery, ListQuery } from "../../lib/ownership";
import { asStream, defineRoute } from "../../lib/route";
import { Success } from "../../lib/response-schemas";
import {
  PipelineBulkRun,
  PipelineCreated,
  PipelineFetched,
  PipelineList,
  PipelineUpdated,
  PipelineRunAnswer,
  PipelineRunList,
  PipelineRunStatus,
} from "./pipelines.responses";
import {
  PipelineBulkRunBody,
  PipelineParams,
  PipelineResumeBody,
  PipelineRunBody,
  PipelineRunIdBody,
  PipelineRunParams,
  PipelineRunsQuery,
} from "./pipelines.schemas";
import { createPipeline, deletePipeline, fetchPipeline, listPipelines, updatePipeline } from "./pipelines.service";
import {
  DEFINITION_FORMATS,
  PipelineCreateRequest,
  PipelineUpdateRequest,
  toDefinition,
} from "./pipeline-definition-body";
import { getRunStatus, listRuns, pauseRun, resumeRuns, terminateRun } from "./pipeline-run-control";
import { bulkRunPipeline, runAnswer, startPipelineRun, streamRun, withFileParts } from "./pipeline-runs.service";

export function registerPipelineRoutes(app: OpenAPIHono<AppBindings>): void {
  const tags = ["Pipelines"];
  const base = { group: "A" as const, auth: "api_key" as const, tags };
  for (const [name, schema] of Object.entries(DEFINITION_FORMATS)) app.openAPIRegistry.register(name, schema);

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/pipeline",
      response: PipelineCreated,
      summary: "Create a pipeline",
      description:
        "In Loom's format or the editor format (`nodes` keyed by node id). Rejects cycles, dangling edges, unknown node types, unusable references, template variables that point nowhere and sub-pipelines nested or fanned out past the run limits, naming the node. Answers `{status, id}`, and in the editor format also `branch_id` and `version`.",
      body: PipelineCreateRequest,
      responses: { 403: "Viewers cannot create", 409: "Name taken" },
    },
    async (c, { body }) => {
      const definition = toDefinition(body);
      const created = await createPipeline(
        c.env,
        c.get("auth"),
        { ...definition, name: definition.name ?? "" },
        c.get("deps").nodeServices(c.env),
      );
      // Loom's format keeps its `{status, id}` answer; the editor's clients read `branch_id` too.
      return c.json(body.format === "editor" ? created : { status: created.status, id: created.id });
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/update/pipeline/:id",
      summary: "Replace a pipeline's definition (a new version)",
      description:
        "The editor's `save`: in either format, checked as a creation is. Runs already started keep the version they started with. Allowed to the pipeline's owner and admins. Answers `{status, id, branch_id, version}`.",
      response: PipelineUpdated,
      params: PipelineParams,
      body: PipelineUpdateRequest,
      responses: { 403: "Not yours", 404: "No such pipeline", 409: "Name taken" },
    },
    async (c, { params, body }) =>
      c.json(
        await updatePipeline(c.env, c.get("auth"), params.id, toDefinition(body), c.get("deps").nodeServices(c.env)),
      ),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/pipeline",
      response: PipelineFetched,
      summary: "Fetch a pipeline by id or name",
      query: FetchQuery,
      responses: { 404: "No such pipeline" },
    },
    async (c, { query }) => c.json(await fetchPipeline(c.env, c.get("auth"), query)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/pipelines",
      response: PipelineList,
      summary: "List pipelines",
      query: ListQuery,
    },
    async (c, { query }) => c.json(await listPipelines(c.env, c.get("auth"), query.include_shared, query.verbose)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/v1/pipeline/:id",
      response: Success,
      summary: "Delete a pipeline (its runs in progress are terminated)",
      params: PipelineParams,
      responses: { 403: "Not yours", 404: "No such pipeline" },
    },
    async (c, { params }) => c.json(await deletePipeline(c.env, c.get("auth"), params.id)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/pipeline/:id/run",
      response: PipelineRunAnswer,
      summary: "Run a pipeline",
      description:
        'Waits and answers `{status: "success", run_id, outputs}`; a run that pauses answers its `run_id` and `state`; `background: true` answers the `run_id` at once; `stream: true` sends server-sent events `{type, run_id, output_name, output_value}`.',
      params: PipelineParams,
      body: PipelineRunBody,
      streams: true,
      responses: { 404: "No such pipeline", 429: "Too many runs in progress" },
    },
    async (c, { params, body }) => {
      const auth = c.get("auth");
      const { inputs: given, stream, background, ...rest } = body;
      const inputs = withFileParts(given, rest);
      if (!stream) return c.json(runAnswer(await startPipelineRun(c.env, auth, params.id, inputs, { background })));
      const started = await startPipelineRun(c.env, auth, params.id, inputs, { background: true, startDelayMs: 0 });
      return asStream(
        streamSSE(c, async (sse) => {
          for await (const event of streamRun(c.env, started))
            await sse.writeSSE({ data: JSON.stringify(event), event: event.type });
        }),
      );
    },
  );

  const bulk = (path: string) =>
    defineRoute(
      app,
      {
        ...base,
        method: "post",
        path,
        response: PipelineBulkRun,
        summary: "Start several background runs",
        params: PipelineParams,
        body: PipelineBulkRunBody,
        responses: { 404: "No such pipeline", 429: "Too many runs in progress" },
      },
      async (c, { params, body }) => c.json(await bulkRunPipeline(c.env, c.get("auth"), params.id, body.runs)),
    );
  bulk("/v1/pipeline/:id/bulk-run");
  bulk("/v1/pipeline/:id/bulk_run");

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/pipeline/:id/run/status/:run_id",
      response: PipelineRunStatus,
      summary: "A run's status, result, error and node states",
      params: PipelineRunParams,
      responses: { 404: "No such run" },
    },
    async (c, { params }) => c.json(await getRunStatus(c.env, c.get("auth"), params.id, params.run_id)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/pipeline/:id/runs",
      response: PipelineRunList,
      summary: "Run history, newest first",
      params: PipelineParams,
      query: PipelineRunsQuery,
      responses: { 404: "No such pipeline" },
    },
    async (c, { params, query }) =>
      c.json(await listRuns(c.env, c.get("auth"), params.id, query.page, query.page_size)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/pipeline/:id/pause",
      response: Success,
      summary: "Pause a queued or running run",
      description: "Allowed to the run's starter, the pipeline's owner and admins.",
      params: PipelineParams,
      body: PipelineRunIdBody,
      responses: { 403: "Not your run or pipeline", 404: "No such run", 409: "The run is not running" },
    },
    async (c, { params, body }) => c.json(await pauseRun(c.env, c.get("auth"), params.id, body.run_id)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/pipeline/:id/resume",
      response: Success,
      summary: "Resume paused runs (all or nothing)",
      description:
        "Every run is checked first; if one is unknown, not the caller's to resume or not paused, none is resumed and the error names it. Resuming is allowed to the run's starter, the pipeline's owner and admins; a run waiting at approval nodes is approved by resuming it, which only the pipeline's owner, admins and the nodes' `approvers` may do.",
      params: PipelineParams,
      body: PipelineResumeBody,
      responses: {
        403: "Not allowed to resume or approve a run",
        404: "No such run",
        409: "A run is not paused",
        429: "Resuming would pass the concurrent-run limit",
      },
    },
    async (c, { params, body }) => c.json(await resumeRuns(c.env, c.get("auth"), params.id, body.run_ids)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/pipeline/:id/terminate",
      response: Success,
      summary: "Terminate a queued, running or paused run",
      description: "Allowed to the run's starter, the pipeline's owner and admins.",
      params: PipelineParams,
      body: PipelineRunIdBody,
      responses: { 403: "Not your run or pipeline", 404: "No such run", 409: "The run already ended" },
    },
    async (c, { params, body }) => c.json(await terminateRun(c.env, c.get("auth"), params.id, body.run_id)),
  );
}
