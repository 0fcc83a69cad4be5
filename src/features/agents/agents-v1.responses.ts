import { z } from "@hono/zod-openapi";
import { fetchedObjectOf } from "../../lib/response-schemas";

const Json = z.record(z.string(), z.unknown());

export const AgentWritten = z
  .object({ status: z.literal("success"), id: z.string(), branch_id: z.string(), version: z.number().int() })
  .openapi("AgentWritten", {
    description: "The agent's id; `branch_id` is the id again (Loom keeps one branch per agent).",
  });

const PendingCall = z
  .object({ id: z.string(), name: z.string(), arguments: Json, waiting: z.enum(["approval", "question"]) })
  .openapi("AgentPendingCall");
const Step = Json.openapi("AgentRunStep", {
  description: '`{type: "model", text, tool_calls}` or `{type: "tool_result", call_id, name, content, is_error}`.',
});
const Usage = z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() });

export const AgentRunAnswer = z
  .object({
    status: z.enum(["success", "failed"]),
    run_id: z.string(),
    state: z.enum(["running", "paused", "completed", "failed", "terminated"]),
    outputs: z.record(z.string(), z.string()),
    steps: z.array(Step),
    pending: z.array(PendingCall),
    usage: Usage,
    error: z.string().optional(),
  })
  .openapi("AgentRunAnswer");

export const AgentRunStatus = z
  .object({
    status: z.literal("success"),
    run: z.object({
      run_id: z.string(),
      agent_id: z.string(),
      status: z.string(),
      error: z.string().nullable(),
      outputs: z.record(z.string(), z.string()),
      steps: z.array(Step),
      pending: z.array(PendingCall),
      usage: Usage,
      model_turns: z.number().int(),
      version: z.number().int(),
    }),
  })
  .openapi("AgentRunStatus");

export const AgentRunList = z
  .object({
    status: z.literal("success"),
    runs: z.array(
      z.object({
        run_id: z.string(),
        status: z.string(),
        error: z.string().nullable(),
        started_by: z.string(),
        parent_run_id: z.string().nullable(),
        created_at: z.string(),
        finished_at: z.string().nullable(),
      }),
    ),
  })
  .openapi("AgentRunList");

/**
 * fetchAgentV1's record (agents-v1.service.ts with definitionForSdk). The author's input/output
 * declarations and a tool's `value` (its node type and inputs) are the author's data, free-form.
 */
export const AgentV1 = z
  .object({
    _id: z.string(),
    name: z.string(),
    description: z.string(),
    mainBranch: z.string(),
    branch_id: z.string(),
    version: z.number().int(),
    ownerId: z.string(),
    orgId: z.string(),
    sourceAgentId: z.string().nullable(),
    llm_client_key: z.object({ provider: z.string(), model_id: z.string() }),
    tools: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        description: z.string(),
        requires_approval: z.boolean(),
        value: Json,
      }),
    ),
    instructions: z.string(),
    inputs: z.record(z.string(), Json),
    outputs: z.record(z.string(), Json),
    max_steps: z.number(),
    token_budget: z.number(),
    max_tool_errors: z.number(),
    max_wall_seconds: z.number(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("AgentV1");
export const AgentV1Fetched = fetchedObjectOf("AgentV1", AgentV1);
