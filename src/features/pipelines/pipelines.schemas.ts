import { z } from "@hono/zod-openapi";
import { zArray, zBool, zFreeObject, zId, zInt, zJsonObject, zString } from "../../lib/schema";

/** Bounds of a definition, so one pipeline cannot make a run unbounded. */
export const MAX_NODES = 200;
export const MAX_EDGES = 1000;
export const MAX_TEMPLATE_CHARS = 32 * 1024;
/** A definition and a run's inputs each fit one SQLite row (2 MB) with room to spare. */
export const MAX_DEFINITION_BYTES = 1024 * 1024;
export const MAX_INPUT_BYTES = 1024 * 1024;

export const NODE_TYPES = [
  "input",
  "output",
  "text",
  "llm",
  "knowledge_base",
  "transformation",
  "condition",
  "merge",
  "approval",
  "wait",
  "pipeline",
] as const;
export type NodeType = (typeof NODE_TYPES)[number];

const NodeIdPattern = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

export const PipelineNodeSchema = z.object({
  id: z.string().regex(NodeIdPattern, "node ids are 1-64 letters, digits, '_' or '-', starting with a letter or '_'"),
  type: zString(1, 40),
  config: zFreeObject(MAX_TEMPLATE_CHARS * 4)
    .optional()
    .default({}),
});

export const PipelineEdgeSchema = z.object({
  source: zString(1, 64),
  target: zString(1, 64),
  source_output: zString(1, 64).optional(),
  target_input: zString(1, 64).optional(),
});

export type PipelineNode = z.output<typeof PipelineNodeSchema>;
export type PipelineEdge = z.output<typeof PipelineEdgeSchema>;

const loomFields = {
  description: zString(0, 2000).optional(),
  nodes: zArray(zJsonObject(PipelineNodeSchema), MAX_NODES).openapi({
    description: "`{id, type, config}`; types: " + NODE_TYPES.join(", "),
  }),
  edges: zArray(zJsonObject(PipelineEdgeSchema), MAX_EDGES).optional().default([]),
  max_steps: zInt(1, 10_000)
    .optional()
    .openapi({ description: "Most node executions one run may take; more fails the run. Default 1000." }),
  node_timeout_seconds: zInt(1, 900).optional().openapi({
    description: "Default time limit of one node; a node's `config.timeout_seconds` overrides it. Default 300.",
  }),
};
const loomBounds = {
  check: (body: { nodes: unknown; edges: unknown }) =>
    JSON.stringify(body.nodes).length + JSON.stringify(body.edges).length <= MAX_DEFINITION_BYTES,
  message: {
    message: `the definition (nodes and edges) must serialize to at most ${MAX_DEFINITION_BYTES} bytes`,
    path: ["nodes"],
  },
};

export const PipelineCreateBody = z
  .object({ name: zString(1, 200), ...loomFields })
  .refine(loomBounds.check, loomBounds.message)
  .openapi("PipelineCreateBody");
/** An update in Loom's format: the path names the pipeline, so `name` may be left out (it keeps its name). */
export const PipelineUpdateBody = z
  .object({ name: zString(1, 200).optional(), ...loomFields, branch_id: zString(0, 64).optional() })
  .refine(loomBounds.check, loomBounds.message)
  .openapi("PipelineUpdateBody");
export type PipelineCreateInput = z.output<typeof PipelineCreateBody>;

export const PipelineParams = z.object({ id: zId() });
export const PipelineRunParams = z.object({ id: zId(), run_id: zId() });

const Inputs = zFreeObject(MAX_INPUT_BYTES).optional().default({});

export const PipelineRunBody = z
  .object({
    inputs: Inputs.openapi({ description: "Values of the pipeline's input nodes, by input name." }),
    stream: zBool().optional().default(false),
    background: zBool().optional().default(false),
  })
  // The editor's SDK sends a file input as a top-level multipart part named after the input;
  // other unknown fields stay ignored, as they always were.
  .catchall(z.unknown())
  .openapi("PipelineRunBody", {
    description:
      "JSON, or multipart with `inputs` as JSON text and one file part per file input, named after the input.",
  });

export const PipelineBulkRunBody = z
  .object({
    runs: zArray(zJsonObject(z.object({ inputs: Inputs })), 100).refine(
      (runs) => runs.length > 0,
      "must hold at least one run",
    ),
  })
  .openapi("PipelineBulkRunBody");

export const PipelineRunIdBody = z.object({ run_id: zId() }).openapi("PipelineRunIdBody");
export const PipelineResumeBody = z
  .object({ run_ids: zArray(zId(), 100).refine((ids) => ids.length > 0, "must name at least one run") })
  .openapi("PipelineResumeBody");

export const PipelineRunsQuery = z.object({
  page: zInt(1, 100_000).optional().default(1),
  page_size: zInt(1, 100).optional().default(20),
});
