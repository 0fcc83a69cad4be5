import { z } from "@hono/zod-openapi";
import { ownedRecordShape } from "../../lib/response-schemas";

/** The seed's AgentDescription: an agent as its owner and the users it is shared with see it. */
export const AgentDescription = z
  .object({
    ...ownedRecordShape,
    pipelineId: z.string().nullable(),
    config: z.record(z.string(), z.unknown()),
    tags: z.array(z.string()),
    sourceAgentId: z.string().nullable(),
    published: z.boolean(),
    publishedAt: z.string().nullable(),
    category: z.string().nullable(),
    favorite: z.boolean(),
    sharedWithMe: z.boolean(),
  })
  .openapi("AgentDescription");

/** The seed's MarketplaceAgentDescription: nothing private. */
export const MarketplaceAgentDescription = z
  .object({
    _id: z.string(),
    name: z.string(),
    description: z.string(),
    tags: z.array(z.string()),
    category: z.string().nullable(),
    author: z.string().nullable(),
    publishedAt: z.string().nullable(),
    favorites: z.number().int(),
    imports: z.number().int(),
  })
  .openapi("MarketplaceAgentDescription");

export const AgentsFavoritesDescription = z
  .object({ favorites: z.array(AgentDescription) })
  .openapi("AgentsFavoritesDescription");

export const AgentsHistoryDescription = z
  .object({
    _id: z.string(),
    agentId: z.string(),
    agentName: z.string(),
    action: z.string(),
    runId: z.string().nullable().openapi({ description: "For action `run`: the run." }),
    createdAt: z.string(),
  })
  .openapi("AgentsHistoryDescription");

export const AgentList = z.array(AgentDescription);
export const MarketplaceAgentList = z.array(MarketplaceAgentDescription);
export const AgentsHistoryList = z.array(AgentsHistoryDescription);
export const AgentResult = z.object({ status: z.literal("success"), agent: AgentDescription }).openapi("AgentResult");
export const AgentsResult = z.object({ status: z.literal("success"), agents: AgentList }).openapi("AgentsResult");
export const AgentShareResult = z
  .object({ status: z.literal("success"), shared_with: z.array(z.string()) })
  .openapi("AgentShareResult");
