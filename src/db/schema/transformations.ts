import { sqliteTable, text, index, uniqueIndex } from "drizzle-orm/sqlite-core";

export const transformations = sqliteTable(
  "transformations",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id").notNull(),
    ownerId: text("owner_id").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    functionName: text("function_name").notNull(),
    source: text("source").notNull(),
    language: text("language", { enum: ["python", "javascript"] }).notNull(),
    /** The input and output schemas as given (JSON text), either spelling. */
    inputSchema: text("input_schema").notNull(),
    outputSchema: text("output_schema").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("transformations_owner_name").on(t.ownerId, t.name), index("transformations_org").on(t.orgId)],
);

export type TransformationRow = typeof transformations.$inferSelect;
