import { z } from "@hono/zod-openapi";
import { badRequest } from "../../lib/errors";
import { zBool, zFreeObject, zInt, zString } from "../../lib/schema";

/**
 * What an agent runs: the SDK's wire format (`vectorshift.agent.Agent`) read into one validated
 * shape, stored as JSON on the agent record (`agents.definition`). The SDK sends tools as a dict
 * keyed by tool id and reads them back as a list; docs/agents.md documents both directions.
 */

export const TOOL_KINDS = ["knowledge_base", "transformation", "pipeline", "agent", "ask_user"] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

/** Other spellings of node_type accepted for the same tool kinds. */
const KIND_ALIASES: Record<string, ToolKind> = {
  knowledge_base: "knowledge_base",
  knowledge_base_search: "knowledge_base",
  vector_db: "knowledge_base",
  transformation: "transformation",
  pipeline: "pipeline",
  sub_pipeline: "pipeline",
  agent: "agent",
  ask_user: "ask_user",
  human_input: "ask_user",
};

/** Where the record's id may sit in `value.inputs`, by kind (first found wins; `id` works for every kind). */
const TARGET_INPUTS: Record<ToolKind, string[]> = {
  knowledge_base: ["knowledge_base", "knowledge_base_id"],
  transformation: ["transformation", "transformation_id"],
  pipeline: ["pipeline", "pipeline_id"],
  agent: ["agent", "agent_id"],
  ask_user: [],
};

export interface AgentTool {
  id: string;
  /** As the user named it. */
  name: string;
  /** As the model sees it: `^[A-Za-z0-9_-]{1,64}$`, unique within the agent. */
  callName: string;
  description: string;
  kind: ToolKind;
  /** The knowledge base, transformation, pipeline or agent id; null for ask_user. */
  target: string | null;
  requiresApproval: boolean;
  /** `value.inputs` as sent, returned on fetch. */
  inputs: Record<string, unknown>;
  taskName: string | null;
}

export interface IoDeclaration {
  name: string;
  io_type: string;
  description: string;
}

export interface AgentLimits {
  /** Model turns one run may take. */
  maxSteps: number;
  /** Input plus output tokens one run may use, over all its model turns. */
  tokenBudget: number;
  /** Tool failures fed back to the model before the run gives up. */
  maxToolErrors: number;
  /** Wall-clock seconds from start to finish, paused time excluded. */
  wallSeconds: number;
}

export interface AgentDefinition {
  instructions: string;
  llm: { provider: string; model_id: string };
  tools: AgentTool[];
  inputs: Record<string, IoDeclaration>;
  outputs: Record<string, IoDeclaration>;
  limits: AgentLimits;
}

export const DEFAULT_LIMITS: AgentLimits = { maxSteps: 10, tokenBudget: 200_000, maxToolErrors: 3, wallSeconds: 300 };

const Io = z.record(
  z.string().max(100),
  z.object({
    name: zString(1, 100).optional(),
    io_type: zString(1, 40).optional(),
    type: zString(1, 40).optional(),
    description: zString(0, 1000).optional(),
  }),
);

const LlmClientKey = z
  .object({
    provider: zString(1, 120).openapi({
      description: "A connection of the organization (its name or kind), or `loom` for the offline built-in.",
    }),
    model_id: zString(1, 200),
    api_key: z.string().max(1000).optional().openapi({
      description: "Refused: keys are kept in connections (POST /admin/connections/create), never in an agent.",
    }),
  })
  .catchall(z.unknown());

const ToolBody = z.object({
  id: zString(0, 120).optional(),
  name: zString(1, 120),
  description: zString(0, 2000).optional().default(""),
  requires_approval: zBool().optional(),
  value: z
    .object({
      node_type: zString(1, 60),
      inputs: zFreeObject(16 * 1024)
        .optional()
        .default({}),
      task_name: zString(0, 120).optional(),
      requires_approval: zBool().optional(),
      id: zString(1, 120).optional(),
    })
    .catchall(z.unknown()),
});

export const AgentWriteBody = z
  .object({
    name: zString(1, 120),
    description: zString(0, 2000).optional().default(""),
    llm_client_key: LlmClientKey.optional(),
    tools: z
      .union([z.record(z.string().max(120), ToolBody), z.array(ToolBody)])
      .optional()
      .default({}),
    instructions: zString(0, 20_000).optional().default(""),
    inputs: Io.optional().default({}),
    outputs: Io.optional().default({}),
    max_steps: zInt(1, 100).optional(),
    token_budget: zInt(100, 5_000_000).optional(),
    max_tool_errors: zInt(0, 20).optional(),
    max_wall_seconds: zInt(1, 3600).optional(),
    branch_id: z.string().max(120).optional(),
  })
  .openapi("AgentWriteBody");

export type AgentWriteInput = z.output<typeof AgentWriteBody>;

function readIo(io: z.output<typeof Io>, what: string): Record<string, IoDeclaration> {
  const entries = Object.entries(io);
  if (entries.length > 32) throw badRequest(`${what}: at most 32 entries`);
  const names = new Set<string>();
  const out: Record<string, IoDeclaration> = {};
  for (const [key, value] of entries) {
    const name = value.name ?? key;
    if (names.has(name)) throw badRequest(`${what}: two entries are named '${name}'`);
    names.add(name);
    out[key] = { name, io_type: value.io_type ?? value.type ?? "string", description: value.description ?? "" };
  }
  return out;
}

function targetOf(kind: ToolKind, value: z.output<typeof ToolBody>["value"]): string | null {
  if (kind === "ask_user") return null;
  const inputs = value.inputs as Record<string, unknown>;
  for (const key of [...TARGET_INPUTS[kind], "id"]) {
    const entry = inputs[key];
    const raw = entry && typeof entry === "object" && "value" in entry ? (entry as { value: unknown }).value : entry;
    if (typeof raw === "string" && raw.trim()) return raw.trim();
  }
  return value.id ?? null;
}

function callNameOf(name: string, taken: Set<string>): string {
  const base =
    name
      .replace(/[^A-Za-z0-9_-]+/g, "_")
      .replace(/^_+|_+$/g, "")
      .slice(0, 56) || "tool";
  let candidate = base;
  for (let i = 2; taken.has(candidate); i++) candidate = `${base}_${i}`;
  taken.add(candidate);
  return candidate;
}

/** Reads the SDK's body into a definition; a key in `llm_client_key` is refused, never stored. */
export function readDefinition(body: AgentWriteInput, previous?: AgentDefinition): AgentDefinition {
  if (body.llm_client_key?.api_key) {
    throw badRequest(
      "llm_client_key.api_key: Loom never stores model keys in an agent; add a connection holding the key (POST /admin/connections/create) and name it as llm_client_key.provider",
    );
  }
  const toolList = Array.isArray(body.tools)
    ? body.tools.map((t) => [t.id ?? t.name, t] as const)
    : Object.entries(body.tools);
  if (toolList.length > 32) throw badRequest("tools: at most 32 tools");
  const taken = new Set<string>();
  const tools = toolList.map(([key, tool]): AgentTool => {
    const kind = KIND_ALIASES[tool.value.node_type];
    if (!kind)
      throw badRequest(
        `tools.${key}.value.node_type: '${tool.value.node_type.slice(0, 60)}' is not one of ${TOOL_KINDS.join(", ")}`,
      );
    const target = targetOf(kind, tool.value);
    if (kind !== "ask_user" && !target)
      throw badRequest(
        `tools.${key}: name the ${kind.replace("_", " ")} in value.inputs.${TARGET_INPUTS[kind][0]}.value`,
      );
    return {
      id: tool.id || key,
      name: tool.name,
      callName: callNameOf(tool.name, taken),
      description: tool.description,
      kind,
      target,
      requiresApproval: tool.requires_approval ?? tool.value.requires_approval ?? false,
      inputs: tool.value.inputs as Record<string, unknown>,
      taskName: tool.value.task_name ?? null,
    };
  });
  const limits = previous?.limits ?? DEFAULT_LIMITS;
  return {
    instructions: body.instructions,
    llm: body.llm_client_key
      ? { provider: body.llm_client_key.provider, model_id: body.llm_client_key.model_id }
      : (previous?.llm ?? { provider: "loom", model_id: "extractive" }),
    tools,
    inputs: readIo(body.inputs, "inputs"),
    outputs: readIo(body.outputs, "outputs"),
    limits: {
      maxSteps: body.max_steps ?? limits.maxSteps,
      tokenBudget: body.token_budget ?? limits.tokenBudget,
      maxToolErrors: body.max_tool_errors ?? limits.maxToolErrors,
      wallSeconds: body.max_wall_seconds ?? limits.wallSeconds,
    },
  };
}

/** The stored definition, or an empty one for a record that was never given one. */
export function storedDefinition(stored: AgentDefinition | null): AgentDefinition {
  if (!stored)
    return {
      instructions: "",
      llm: { provider: "loom", model_id: "extractive" },
      tools: [],
      inputs: {},
      outputs: {},
      limits: DEFAULT_LIMITS,
    };
  return stored;
}

/** The definition as the SDK reads it back (`Agent.from_json`): tools as a list, no secret anywhere. */
export function definitionForSdk(definition: AgentDefinition) {
  return {
    llm_client_key: definition.llm,
    tools: definition.tools.map((tool) => ({
      id: tool.id,
      name: tool.name,
      description: tool.description,
      requires_approval: tool.requiresApproval,
      value: { node_type: tool.kind, inputs: tool.inputs, ...(tool.taskName ? { task_name: tool.taskName } : {}) },
    })),
    instructions: definition.instructions,
    inputs: definition.inputs,
    outputs: definition.outputs,
    max_steps: definition.limits.maxSteps,
    token_budget: definition.limits.tokenBudget,
    max_tool_errors: definition.limits.maxToolErrors,
    max_wall_seconds: definition.limits.wallSeconds,
  };
}

/** The output an answer fills: the first string output, else `output`. */
export function answerOutputName(definition: AgentDefinition): string {
  const first =
    Object.values(definition.outputs).find((o) => ["string", "text"].includes(o.io_type.toLowerCase())) ??
    Object.values(definition.outputs)[0];
  return first?.name ?? "output";
}
