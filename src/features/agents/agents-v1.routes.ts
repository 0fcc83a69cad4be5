import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { FetchQuery } from "../../lib/ownership";
import { Success } from "../../lib/response-schemas";
import { asStream, defineRoute } from "../../lib/route";
import { withFileParts } from "../pipelines/pipeline-runs.service";
import { AgentWriteBody } from "./agent-definition";
import type { Decision } from "./agent-run-store";
import {
  agentRunAnswer,
  decideAgentRun,
  getAgentRun,
  listAgentRuns,
  runAndWait,
  runStub,
  startAgentRun,
  terminateAgentRun,
} from "./agent-runs.service";
import { AgentParams, AgentResumeBody, AgentRunBody, AgentRunIdBody, AgentRunParams } from "./agents-v1.schemas";
import { AgentRunAnswer, AgentRunList, AgentRunStatus, AgentV1Fetched, AgentWritten } from "./agents-v1.responses";
import { createAgentV1, deleteAgentV1, fetchAgentV1, updateAgentV1 } from "./agents-v1.service";

/** The SDK's Agent API (Group A), on the same records as the Group B `/agents/...` routes. */
export function registerAgentV1Routes(app: OpenAPIHono<AppBindings>): void {
  const base = { group: "A", auth: "api_key", tags: ["Agents"] } as const;

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/agent",
      response: AgentWritten,
      summary: "Create an agent",
      description:
        "The SDK's body: `llm_client_key` names a connection (never a key), `tools` a dict keyed by tool id (see docs/agents.md).",
      body: AgentWriteBody,
      responses: { 403: "Viewers cannot create", 409: "Name taken" },
    },
    async (c, { body }) => c.json(await createAgentV1(c.env, c.get("auth"), c.get("deps").nodeServices(c.env), body)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/agent",
      response: AgentV1Fetched,
      summary: "Fetch an agent by id or name (tools as a list)",
      query: FetchQuery,
      responses: { 404: "No such agent" },
    },
    async (c, { query }) => c.json(await fetchAgentV1(c.env, c.get("auth"), query)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/update/agent/:id",
      response: AgentWritten,
      summary: "Replace an agent's definition",
      description: "Owner, admin, or a user it is shared with as editor.",
      params: AgentParams,
      body: AgentWriteBody,
      responses: { 403: "Not allowed to edit", 404: "No such agent", 409: "Name taken" },
    },
    async (c, { params, body }) =>
      c.json(await updateAgentV1(c.env, c.get("auth"), c.get("deps").nodeServices(c.env), params.id, body)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "delete",
      path: "/v1/agent/:id",
      response: Success,
      summary: "Delete an agent",
      params: AgentParams,
      responses: { 403: "Not yours", 404: "No such agent" },
    },
    async (c, { params }) => c.json(await deleteAgentV1(c.env, c.get("auth"), params.id)),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/agent/:id/run",
      response: AgentRunAnswer,
      summary: "Run an agent",
      description:
        "Waits and answers the outputs, the steps and the run id; a run that pauses (approval, ask_user) answers `state: paused` with its pending calls. `stream: true` sends server-sent events: `token`, `tool_call`, `tool_result`, `paused`, then `final` or `error`.",
      params: AgentParams,
      body: AgentRunBody,
      streams: true,
      responses: { 403: "The agent's owner can no longer use it", 404: "No such agent" },
    },
    async (c, { params, body }) => {
      const { inputs: given, stream, additional_instructions: extra, ...rest } = body;
      const init = await startAgentRun(c.env, c.get("auth"), params.id, {
        inputs: withFileParts(given, rest),
        additionalInstructions: extra ?? null,
      });
      if (!stream) return c.json(agentRunAnswer(await runAndWait(c.env, init)));
      const events = await runStub(c.env, init.runId).startStreaming(init);
      return asStream(
        new Response(events, {
          headers: { "content-type": "text/event-stream", "cache-control": "no-cache", "x-run-id": init.runId },
        }),
      );
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/agent/:id/runs",
      response: AgentRunList,
      summary: "The agent's runs, newest first",
      params: AgentParams,
      responses: { 404: "No such agent" },
    },
    async (c, { params }) =>
      c.json({ status: "success" as const, runs: await listAgentRuns(c.env, c.get("auth"), params.id) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "get",
      path: "/v1/agent/:id/run/status/:run_id",
      response: AgentRunStatus,
      summary: "A run's state, steps and pending calls",
      params: AgentRunParams,
      responses: { 404: "No such run" },
    },
    async (c, { params }) =>
      c.json({ status: "success" as const, run: await getAgentRun(c.env, c.get("auth"), params.id, params.run_id) }),
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/agent/:id/resume",
      response: AgentRunAnswer,
      summary: "Approve, refuse or answer a paused run's pending calls, and resume it",
      description:
        "Every pending call must be decided. Approving and refusing is for the agent's owner, admins and editors; answering an ask_user call also for the run's starter. A refusal is given to the model as the call's result.",
      params: AgentParams,
      body: AgentResumeBody,
      responses: {
        403: "Not allowed to decide",
        404: "No such run",
        409: "The run is not paused, or the decisions do not match its pending calls",
      },
    },
    async (c, { params, body }) => {
      const decisions: Decision[] = [
        ...body.approve.map((callId): Decision => ({ callId, kind: "approved" })),
        ...body.refuse.map((callId): Decision => ({ callId, kind: "refused" })),
        ...Object.entries(body.answers).map(([callId, answer]): Decision => ({ callId, kind: "answered", answer })),
      ];
      const auth = c.get("auth");
      await decideAgentRun(c.env, auth, params.id, body.run_id, decisions);
      const view =
        (await runStub(c.env, body.run_id).waitUntilSettled(120_000)) ??
        (await getAgentRun(c.env, auth, params.id, body.run_id));
      return c.json(agentRunAnswer(view));
    },
  );

  defineRoute(
    app,
    {
      ...base,
      method: "post",
      path: "/v1/agent/:id/terminate",
      response: Success,
      summary: "Terminate a running or paused run",
      params: AgentParams,
      body: AgentRunIdBody,
      responses: { 403: "Not allowed", 404: "No such run", 409: "The run already ended" },
    },
    async (c, { params, body }) => {
      await terminateAgentRun(c.env, c.get("auth"), params.id, body.run_id);
      return c.json({ status: "success" as const });
    },
  );
}
