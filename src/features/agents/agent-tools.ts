import type { Schema } from "@cfworker/json-schema";
import type { AuthContext, Env } from "../../env";
import { AppError } from "../../lib/errors";
import type { ToolCall, ToolDefinition } from "../../providers/types";
import { NodeFailure, type NodeServices } from "../pipelines/pipeline-services";
import { compileIoSchema } from "../transformations/io-schema";
import { validateAgainst } from "../transformations/schema-validate";
import { getTransformation } from "../transformations/transformations.service";
import type { AgentTool } from "./agent-definition";

/**
 * Presents an agent's tools to the model (a JSON input schema for each, generated from the
 * record it names) and runs the calls the model makes. Every record is looked up with the
 * rights of the agent's owner (`toolAuth`), so a tool reaches only what that user may use: a
 * record of another organization, or of a publisher for an imported copy, is "not found".
 */

/** Largest tool result handed back to the model, in characters. */
export const MAX_TOOL_RESULT_CHARS = 16_000;

export interface PresentedTool {
  tool: AgentTool;
  definition: ToolDefinition;
  /** Null when the model's arguments fit the schema, else why not. */
  check(args: Record<string, unknown>): string | null;
}

/** Runs another agent as a tool: wired by the run object (it owns the child run's id). */
export type ChildAgentRunner = (agentId: string, input: string, call: ToolCall, signal: AbortSignal) => Promise<string>;

export interface ToolContext {
  env: Env;
  auth: AuthContext;
  services: NodeServices;
  runChildAgent: ChildAgentRunner;
  signal: AbortSignal;
}

const stringArg = (name: string, description: string): Schema => ({
  type: "object",
  properties: { [name]: { type: "string", description } },
  required: [name],
  additionalProperties: false,
});

function requireString(name: string): (args: Record<string, unknown>) => string | null {
  return (args) =>
    typeof args[name] === "string" && (args[name] as string).trim() !== ""
      ? null
      : `argument '${name}' must be a non-empty string`;
}

function unusable(kind: string, id: string): NodeFailure {
  return new NodeFailure(`${kind} ${id} does not exist or the agent's owner cannot use it`);
}

async function pipelineSchema(env: Env, auth: AuthContext, pipelineId: string): Promise<Schema> {
  const { loadPipeline } = await import("../pipelines/pipelines.service");
  const pipeline = await loadPipeline(env, auth, pipelineId).catch((error: unknown) => {
    if (error instanceof AppError && error.code === "not_found") throw unusable("pipeline", pipelineId);
    throw error;
  });
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const node of pipeline.graph.nodes) {
    if (node.type !== "input") continue;
    const config = node.config as { name: string; type?: string; required?: boolean; description?: string };
    properties[config.name] = { description: config.description ?? `input ${config.name} (${config.type ?? "text"})` };
    if (config.required !== false) required.push(config.name);
  }
  return { type: "object", properties, required };
}

async function transformationSchema(env: Env, auth: AuthContext, id: string): Promise<Schema> {
  const record = await getTransformation(env, auth, { id }).catch((error: unknown) => {
    if (error instanceof AppError && error.code === "not_found") throw unusable("transformation", id);
    throw error;
  });
  const compiled = compileIoSchema(record.inputs, "inputs");
  return "schema" in compiled ? compiled.schema : { type: "object" };
}

/**
 * The tools as the model sees them. A tool whose record the owner cannot use is still presented
 * (with an empty schema), and its calls fail with that reason: the run goes on with the others.
 */
export async function presentTools(env: Env, auth: AuthContext, tools: AgentTool[]): Promise<PresentedTool[]> {
  return Promise.all(
    tools.map(async (tool): Promise<PresentedTool> => {
      const describe = (fallback: string) => tool.description || fallback;
      switch (tool.kind) {
        case "knowledge_base":
          return {
            tool,
            definition: {
              name: tool.callName,
              description: describe(`Search the knowledge base '${tool.name}'`),
              parameters: stringArg("query", "what to search for") as Record<string, unknown>,
            },
            check: requireString("query"),
          };
        case "agent":
          return {
            tool,
            definition: {
              name: tool.callName,
              description: describe(`Ask the agent '${tool.name}'`),
              parameters: stringArg("input", "the request for the agent") as Record<string, unknown>,
            },
            check: requireString("input"),
          };
        case "ask_user":
          return {
            tool,
            definition: {
              name: tool.callName,
              description: describe("Ask the user a question and wait for the answer"),
              parameters: stringArg("question", "the question") as Record<string, unknown>,
            },
            check: requireString("question"),
          };
        case "transformation":
        case "pipeline": {
          let schema: Schema;
          try {
            schema =
              tool.kind === "pipeline"
                ? await pipelineSchema(env, auth, tool.target ?? "")
                : await transformationSchema(env, auth, tool.target ?? "");
          } catch (error) {
            if (!(error instanceof NodeFailure)) throw error;
            const reason = error.message;
            return {
              tool,
              definition: {
                name: tool.callName,
                description: describe(`Run the ${tool.kind} '${tool.name}'`),
                parameters: { type: "object" },
              },
              check: () => reason,
            };
          }
          const check = (args: Record<string, unknown>) => validateAgainst(schema, args, "inputs") ?? null;
          return {
            tool,
            definition: {
              name: tool.callName,
              description: describe(`Run the ${tool.kind} '${tool.name}'`),
              parameters: schema as Record<string, unknown>,
            },
            check,
          };
        }
      }
    }),
  );
}

function asText(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > MAX_TOOL_RESULT_CHARS ? `${text.slice(0, MAX_TOOL_RESULT_CHARS)} [truncated]` : text;
}

/** Runs one call; a failure meant for the user is thrown as NodeFailure (fed back to the model). */
export async function executeTool(presented: PresentedTool, call: ToolCall, ctx: ToolContext): Promise<string> {
  const { tool } = presented;
  const target = tool.target ?? "";
  const wrap = async <T>(kind: string, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof AppError && error.code === "not_found") throw unusable(kind, target);
      if (error instanceof AppError) throw new NodeFailure(error.message);
      throw error;
    }
  };
  switch (tool.kind) {
    case "knowledge_base": {
      const result = await wrap("knowledge base", () =>
        ctx.services.queryKnowledgeBase(ctx.auth, target, String(call.arguments.query), {}, ctx.signal),
      );
      return asText(result.text || "(no results)");
    }
    case "transformation":
      return asText(
        await wrap("transformation", () =>
          ctx.services.runTransformation(ctx.auth, target, call.arguments, ctx.signal),
        ),
      );
    case "pipeline": {
      const { runPipelineForUser } = await import("../pipelines/pipeline-runs.service");
      return asText(
        await wrap("pipeline", () =>
          runPipelineForUser(ctx.env, {
            orgId: ctx.auth.orgId,
            userId: ctx.auth.userId,
            pipelineId: target,
            inputs: call.arguments,
            signal: ctx.signal,
          }),
        ),
      );
    }
    case "agent":
      return asText(await ctx.runChildAgent(target, String(call.arguments.input), call, ctx.signal));
    case "ask_user":
      // Answered through the run routes, never executed.
      throw new NodeFailure("ask_user is answered by the user");
  }
}

export function failureText(error: unknown): string {
  if (error instanceof NodeFailure || error instanceof AppError) return error.message;
  if (error instanceof Error && error.name === "AbortError") return "the call was cancelled";
  console.error(
    JSON.stringify({
      level: "error",
      where: "agent tool",
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    }),
  );
  return "internal error while running the tool";
}

export function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(new NodeFailure("the call was cancelled"));
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}
