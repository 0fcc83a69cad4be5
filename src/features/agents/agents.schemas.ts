import { z } from "@hono/zod-openapi";
import { zArray, zFreeObject, zId, zString } from "../../lib/schema";

const Tags = zArray(zString(1, 40), 20);

export const AgentIdQuery = z.object({ agent_id: zId() });
export const AgentIdBody = z.object({ agent_id: zId() }).openapi("Body_agent_id");
export const AgentIdParams = z.object({ agent_id: zId() });
export const UnpublishParams = z.object({
  pipeline_id: zId().openapi({
    description: "The agent's pipeline id, or the agent id itself for an agent without a pipeline.",
  }),
});

export const AgentAddBody = z
  .object({
    name: zString(1, 120),
    description: zString(0, 2000).default(""),
    pipeline_id: zId().optional().openapi({ description: "The pipeline this agent runs, if any." }),
    config: zFreeObject(64 * 1024)
      .optional()
      .openapi({
        description:
          "Instructions, model and tool settings. Never put secrets here: published agents' config is copied by importers.",
      }),
    tags: Tags.optional(),
  })
  .openapi("Body_add_agent");

export const AgentDuplicateBody = z
  .object({ agent_id: zId(), name: zString(1, 120), description: zString(1, 2000) })
  .openapi("Body_duplicate_agent");

export const AgentPublishBody = z
  .object({ agent_id: zId(), category: zString(1, 60).optional(), tags: Tags.optional() })
  .openapi("Body_publish_agent");

export const AgentImportBody = z
  .object({ name: zString(1, 120).optional(), description: zString(0, 2000).optional() })
  .openapi("Body_import_agent");

export const AgentShareBody = z
  .object({
    agent_id: zId(),
    user_ids: zArray(zId(), 100).optional(),
    emails: zArray(z.string().max(254).email(), 100).optional(),
    role: z
      .enum(["viewer", "editor"])
      .optional()
      .default("viewer")
      .openapi({ description: "viewer: may see and run the agent; editor: may also change its definition." }),
  })
  .openapi("Body_share_agent");

export const AgentShareRemoveBody = z
  .object({
    agent_id: zId(),
    user_id: zId().optional().openapi({
      description: "As the agent's owner or an admin: whose access to remove. Absent: drop the share to yourself.",
    }),
  })
  .openapi("Body_remove_shared_agent");
