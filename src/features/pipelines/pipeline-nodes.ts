import { z } from "@hono/zod-openapi";
import { zBool, zId, zInt, zNumber, zString } from "../../lib/schema";
import { MAX_TEMPLATE_CHARS, type NodeType } from "./pipelines.schemas";

/** The configuration each node type takes. Unknown keys are rejected so typos do not pass silently. */
const Template = zString(0, MAX_TEMPLATE_CHARS);
const Timeout = { timeout_seconds: zInt(1, 900).optional() };
const TemplateMap = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/, "names are letters, digits, '_' or '-'"),
  z.unknown(),
);

export const INPUT_TYPES = ["text", "number", "boolean", "json", "file"] as const;
export const CONDITION_OPERATORS = [
  "equals",
  "not_equals",
  "contains",
  "not_contains",
  "starts_with",
  "ends_with",
  "greater_than",
  "greater_or_equal",
  "less_than",
  "less_or_equal",
  "is_empty",
  "is_not_empty",
] as const;

const IoName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/, "must be 1-64 letters, digits, '_' or '-'");

export const NODE_CONFIGS = {
  input: z.strictObject({
    name: IoName,
    type: z.enum(INPUT_TYPES).optional().default("text"),
    required: zBool().optional().default(true),
    default: z.unknown().optional(),
    description: zString(0, 1000).optional(),
    ...Timeout,
  }),
  output: z.strictObject({
    name: IoName,
    value: Template.optional(),
    description: zString(0, 1000).optional(),
    ...Timeout,
  }),
  text: z.strictObject({ text: Template, ...Timeout }),
  llm: z.strictObject({
    prompt: Template,
    system: Template.optional(),
    model: zString(1, 200).optional(),
    connection_id: zId().optional(),
    temperature: zNumber(0, 2).optional(),
    max_tokens: zInt(1, 200_000).optional(),
    ...Timeout,
  }),
  knowledge_base: z.strictObject({
    knowledge_base_id: zId(),
    query: Template,
    search_metadata: z.record(z.string(), z.unknown()).optional(),
    config: z.record(z.string(), z.unknown()).optional(),
    ...Timeout,
  }),
  transformation: z.strictObject({ transformation_id: zId(), inputs: TemplateMap.optional().default({}), ...Timeout }),
  condition: z.strictObject({
    left: Template,
    operator: z.enum(CONDITION_OPERATORS),
    right: Template.optional().default(""),
    ...Timeout,
  }),
  merge: z.strictObject({ strategy: z.enum(["first", "all"]).optional().default("first"), ...Timeout }),
  // approvers: user ids (of the pipeline's organization) who may approve, besides the pipeline's owner and admins.
  approval: z.strictObject({
    message: zString(0, 2000).optional(),
    approvers: z.array(zId()).max(50).optional(),
    ...Timeout,
  }),
  wait: z.strictObject({ seconds: zNumber(0, 7 * 24 * 3600), ...Timeout }),
  pipeline: z.strictObject({ pipeline_id: zId(), inputs: TemplateMap.optional().default({}), ...Timeout }),
} satisfies Record<NodeType, z.ZodType>;

export type NodeConfigs = { [K in NodeType]: z.output<(typeof NODE_CONFIGS)[K]> };

/** A validated node: its type narrows its config. */
export type NodeSpec = { [K in NodeType]: { id: string; type: K; config: NodeConfigs[K] } }[NodeType];

/**
 * The outputs each type produces, main output first. `null`: the names depend on what the node
 * runs (a transformation's or sub-pipeline's outputs), so any name is accepted.
 */
export const NODE_OUTPUTS: Record<NodeType, readonly string[] | null> = {
  input: ["value"],
  output: ["value"],
  text: ["text"],
  llm: ["response", "model"],
  knowledge_base: ["text", "results", "response"],
  transformation: null,
  condition: ["result", "value"],
  merge: ["value"],
  approval: ["value"],
  wait: ["value"],
  pipeline: null,
};

/** Nodes whose execution reaches outside the run (a model, a sandbox, another run). */
export const EXTERNAL_NODE_TYPES: ReadonlySet<NodeType> = new Set([
  "llm",
  "knowledge_base",
  "transformation",
  "pipeline",
]);
