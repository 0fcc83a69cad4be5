import { z } from "@hono/zod-openapi";
import { zBool, zFreeObject, zId, zJsonObject, zString } from "../../lib/schema";

/** What a connection points at. Model providers are used by `<connection>/<model>` names. */
export const CONNECTION_KINDS = ["openai", "anthropic", "cohere", "workers_ai", "telephony", "chat_workspace"] as const;
export type ConnectionKind = (typeof CONNECTION_KINDS)[number];

const ConnectionName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9_-]{0,63}$/,
    "1-64 lowercase letters, digits, '_' or '-', starting with a letter or digit (it prefixes model names: <connection>/<model>)",
  );

const BaseUrl = z
  .string()
  .max(500)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "https:" || url.protocol === "http:") && !url.username && !url.password;
    } catch {
      return false;
    }
  }, "must be an http(s) URL without credentials");

const Models = zJsonObject(
  z
    .object({
      chat: zString(1, 200).optional(),
      embedding: zString(1, 200).optional(),
      rerank: zString(1, 200).optional(),
      transcription: zString(1, 200).optional(),
    })
    .strict(),
);

const shared = {
  base_url: BaseUrl.optional(),
  secret: zString(1, 4000).optional().openapi({ description: "API key or token. Write-only: never returned." }),
  api_key: zString(1, 4000).optional().openapi({ description: "Alias of `secret`." }),
  models: Models.optional().openapi({
    description: "Default models by purpose: chat, embedding, rerank, transcription.",
  }),
  chat_model: zString(1, 200).optional(),
  embedding_model: zString(1, 200).optional(),
  rerank_model: zString(1, 200).optional(),
  transcription_model: zString(1, 200).optional(),
  settings: zFreeObject(16 * 1024)
    .optional()
    .openapi({ description: "Non-secret settings (account ids, phone numbers)." }),
};

export const ConnectionCreateBody = z
  .object({ name: ConnectionName, kind: z.enum(CONNECTION_KINDS), ...shared })
  .openapi("Body_create_connection");

export const ConnectionUpdateBody = z
  .object({
    connection_id: zId().optional(),
    name: ConnectionName.optional().openapi({ description: "Identifies the connection when connection_id is absent." }),
    new_name: ConnectionName.optional(),
    clear_secret: zBool().optional(),
    ...shared,
  })
  .openapi("Body_update_connection");

export const ConnectionDeleteBody = z
  .object({ connection_id: zId().optional(), name: ConnectionName.optional() })
  .openapi("Body_delete_connection");

export type ConnectionCreateInput = z.output<typeof ConnectionCreateBody>;
export type ConnectionUpdateInput = z.output<typeof ConnectionUpdateBody>;
