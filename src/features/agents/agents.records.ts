import type { agents } from "../../db/schema/agents";
import { ownedRecordFields } from "../../lib/ownership";

export type AgentRow = typeof agents.$inferSelect;

/** AgentDescription: an agent as its owner and the users it is shared with see it. */
export function agentDescription(row: AgentRow, extra: { favorite?: boolean; sharedWithMe?: boolean } = {}) {
  return {
    ...ownedRecordFields(row),
    pipelineId: row.pipelineId,
    config: row.config,
    tags: row.tags,
    sourceAgentId: row.sourceAgentId,
    published: row.published,
    publishedAt: row.publishedAt,
    category: row.category,
    favorite: extra.favorite ?? false,
    sharedWithMe: extra.sharedWithMe ?? false,
  };
}

/** MarketplaceAgentDescription: what anyone browsing the marketplace sees; nothing private. */
export function marketplaceDescription(
  row: AgentRow,
  author: string | null,
  counts: { favorites: number; imports: number },
) {
  return {
    _id: row.id,
    name: row.name,
    description: row.description,
    tags: row.tags,
    category: row.category,
    author,
    publishedAt: row.publishedAt,
    favorites: counts.favorites,
    imports: counts.imports,
  };
}
