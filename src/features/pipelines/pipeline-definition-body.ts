import { z } from "@hono/zod-openapi";
import { EditorPipelineBody, EditorPipelineUpdateBody, fromEditorFormat, isEditorBody } from "./editor-format";
import { PipelineCreateBody, PipelineUpdateBody } from "./pipelines.schemas";
import type { PipelineDefinition } from "./pipelines.service";

/**
 * A definition body in either format: Loom's (`nodes` a list, with `edges`) or the editor's
 * (`nodes` an object keyed by node id). The shape of `nodes` picks the schema, so each format's
 * errors name its own fields rather than a union's "invalid input".
 */
function definitionBody<L extends z.ZodType, E extends z.ZodType>(
  loom: L,
  editor: E,
  name: string,
  formats: [string, string],
) {
  return z
    .unknown()
    .transform((value, ctx) => {
      const format = isEditorBody(value) ? ("editor" as const) : ("loom" as const);
      const parsed = format === "editor" ? editor.safeParse(value) : loom.safeParse(value);
      if (!parsed.success) {
        for (const issue of parsed.error.issues)
          ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
        return z.NEVER;
      }
      return format === "editor"
        ? { format, body: parsed.data as z.output<E> }
        : { format, body: parsed.data as z.output<L> };
    })
    .openapi(name, {
      description:
        "Loom's format `{name, description?, nodes: [{id, type, config}], edges, max_steps?, node_timeout_seconds?}`, or the editor format `{name, nodes: {<node id>: {id, name, type, inputs, outputs, task_name, execution_mode}}, canvas_metadata, inputs, outputs}`.",
      // The shape of `nodes` picks one; both are documented, so a client sees every field.
      oneOf: formats.map((format) => ({ $ref: `#/components/schemas/${format}` })),
    });
}

/** Both formats as named components (registered by pipelines.routes.ts), which the bodies' `oneOf` names. */
export const DEFINITION_FORMATS = {
  PipelineCreateBody,
  EditorPipelineBody,
  PipelineUpdateBody,
  EditorPipelineUpdateBody,
} as const;

export const PipelineCreateRequest = definitionBody(PipelineCreateBody, EditorPipelineBody, "PipelineCreateRequest", [
  "PipelineCreateBody",
  "EditorPipelineBody",
]);
export const PipelineUpdateRequest = definitionBody(
  PipelineUpdateBody,
  EditorPipelineUpdateBody,
  "PipelineUpdateRequest",
  ["PipelineUpdateBody", "EditorPipelineUpdateBody"],
);

type Parsed = z.output<typeof PipelineUpdateRequest> | z.output<typeof PipelineCreateRequest>;

/** Either format as a definition in Loom's terms (the editor's is translated, and kept as sent). */
export function toDefinition(parsed: Parsed): PipelineDefinition {
  const { body } = parsed;
  const settings = {
    max_steps: body.max_steps,
    node_timeout_seconds: body.node_timeout_seconds,
    name: body.name,
    description: body.description,
  };
  if (parsed.format === "editor") {
    const translated = fromEditorFormat(parsed.body);
    return { ...settings, nodes: translated.nodes, edges: translated.edges, editor: translated.editor };
  }
  return { ...settings, nodes: parsed.body.nodes, edges: parsed.body.edges, editor: null };
}
