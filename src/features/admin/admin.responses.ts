import { z } from "@hono/zod-openapi";
import { successWith } from "../../lib/response-schemas";

/** A user as administrators (and the user themself) see it; never a password hash. */
export const UserRecord = z
  .object({
    _id: z.string(),
    email: z.string(),
    username: z.string().nullable(),
    name: z.string(),
    role: z.enum(["owner", "admin", "member", "viewer"]),
    suspended: z.boolean(),
    orgId: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("UserRecord");

export const AuditEntry = z
  .object({
    _id: z.string(),
    orgId: z.string(),
    actorId: z.string().nullable(),
    action: z.string(),
    targetType: z.string().nullable(),
    targetId: z.string().nullable(),
    details: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
  })
  .openapi("AuditEntry");

export const UsersResult = successWith("users", z.array(UserRecord)).openapi("UsersResult");
export const UserResult = successWith("user", UserRecord).openapi("UserResult");
export const OwnerChangeResult = z
  .object({ status: z.literal("success"), previous_owner: z.string(), owner: z.string() })
  .openapi("OwnerChangeResult");
export const AuditResult = successWith("entries", z.array(AuditEntry)).openapi("AuditResult");

/** A connection as responses show it: the secret is write-only, only its last four characters show. */
export const ConnectionRecord = z
  .object({
    _id: z.string(),
    name: z.string(),
    kind: z.string(),
    baseUrl: z.string().nullable(),
    hasSecret: z.boolean(),
    secretLastFour: z.string().nullable(),
    models: z
      .object({ chat: z.string(), embedding: z.string(), rerank: z.string(), transcription: z.string() })
      .partial(),
    settings: z.record(z.string(), z.unknown()),
    orgId: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("ConnectionRecord");

export const ConnectionsResult = successWith("connections", z.array(ConnectionRecord)).openapi("ConnectionsResult");
export const ConnectionResult = successWith("connection", ConnectionRecord).openapi("ConnectionResult");

/** /auth: tokens, the signed-in user, API keys. */
export const CurrentUser = UserRecord.extend({ organization: z.string().nullable() }).openapi("CurrentUser");
export const SignupResult = z
  .object({ access_token: z.string(), token_type: z.literal("bearer"), user: CurrentUser })
  .openapi("SignupResult");
export const AccessToken = z
  .object({ access_token: z.string(), token_type: z.literal("bearer") })
  .openapi("AccessToken");
export const ApiKeyCreated = z
  .object({ id: z.string(), name: z.string(), key: z.string().openapi({ description: "Shown only in this response" }) })
  .openapi("ApiKeyCreated");
export const ApiKeyRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    last_four: z.string(),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable(),
    revoked: z.boolean(),
    revokedAt: z.string().nullable(),
  })
  .openapi("ApiKeyRecord");
export const ApiKeysResult = z.object({ api_keys: z.array(ApiKeyRecord) }).openapi("ApiKeysResult");
