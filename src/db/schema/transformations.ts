import { sqliteTable, text, index, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { IoSchema } from "../../features/transformations/io-schema";

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
    /** The input and output schemas as given (stored as JSON text), either spelling. */
    inputSchema: text("input_schema", { mode: "json" }).$type<IoSchema>().notNull(),
    outputSchema: text("output_schema", { mode: "json" }).$type<IoSchema>().notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("transformations_owner_name").on(t.ownerId, t.name), index("transformations_org").on(t.orgId)],
);

export type TransformationRow = typeof transformations.$inferSelect;
