import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { connections } from "../../db/schema/identity";
import { AppError, invalidInput, notFound } from "../../lib/errors";
import { BlockedUrlError, checkUrl } from "../../lib/ssrf-guard";
import { decryptSecret, encryptSecret } from "../../lib/crypto";
import { modelHostRules, requireSecret } from "../../lib/config";
import { newId } from "../../lib/ids";
import { auditInsert } from "../audit/audit.service";
import type { ConnectionCreateInput, ConnectionKind, ConnectionUpdateInput } from "./connections.schemas";

type ConnectionRow = typeof connections.$inferSelect;
/** Default models by purpose, as the `models` column holds them. */
export type ConnectionModels = ConnectionRow["models"];

/** A connection as responses show it: the secret is write-only. */
export function connectionRecord(row: ConnectionRow) {
  return {
    _id: row.id,
    name: row.name,
    kind: row.kind,
    baseUrl: row.baseUrl,
    hasSecret: row.secretSealed !== null,
    secretLastFour: row.secretLastFour,
    models: row.models,
    settings: row.settings,
    orgId: row.orgId,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

function modelsFrom(
  input: Pick<
    ConnectionCreateInput,
    "models" | "chat_model" | "embedding_model" | "rerank_model" | "transcription_model"
  >,
  base: ConnectionModels = {},
): ConnectionModels {
  const merged: ConnectionModels = { ...base, ...(input.models ?? {}) };
  if (input.chat_model) merged.chat = input.chat_model;
  if (input.embedding_model) merged.embedding = input.embedding_model;
  if (input.rerank_model) merged.rerank = input.rerank_model;
  if (input.transcription_model) merged.transcription = input.transcription_model;
  return merged;
}

async function sealed(
  env: Env,
  secret: string | undefined,
): Promise<{ secretSealed: string; secretLastFour: string } | null> {
  if (!secret) return null;
  return {
    secretSealed: await encryptSecret(secret, requireSecret(env, "ENCRYPTION_KEY")),
    secretLastFour: secret.slice(-4),
  };
}

function baseUrlIssue(msg: string): AppError {
  return new AppError("validation", "request validation failed", {
    issues: [{ loc: ["body", "base_url"], msg, type: "value_error" }],
  });
}

/**
 * The same rules the provider layer applies before each request (egressFetch), checked when the
 * URL is saved so a refused address is a 422 now rather than a failure at first use.
 */
function checkedBaseUrl(env: Env, value: string): string {
  try {
    checkUrl(value, modelHostRules(env));
  } catch (error) {
    if (!(error instanceof BlockedUrlError)) throw error;
    throw baseUrlIssue(
      `refused: ${error.reason}; a local model server must be listed by the operator in ALLOW_PRIVATE_MODEL_HOSTS`,
    );
  }
  return value;
}

/** The URL a connection's requests go to; kinds whose client has a built-in endpoint count as that one. */
function effectiveUrl(kind: string, baseUrl: string | null): string {
  return (baseUrl ?? `default:${kind}`).replace(/\/+$/, "");
}

export async function createConnection(env: Env, auth: AuthContext, input: ConnectionCreateInput) {
  // OpenAI-compatible connections default to OpenAI's own endpoint.
  const baseUrl =
    input.base_url !== undefined
      ? checkedBaseUrl(env, input.base_url)
      : input.kind === "openai"
        ? "https://api.openai.com/v1"
        : null;
  const now = new Date().toISOString();
  const secret = await sealed(env, input.secret ?? input.api_key);
  const row: ConnectionRow = {
    id: newId(),
    orgId: auth.orgId,
    name: input.name,
    kind: input.kind,
    baseUrl,
    secretSealed: secret?.secretSealed ?? null,
    secretLastFour: secret?.secretLastFour ?? null,
    models: modelsFrom(input),
    settings: input.settings ?? {},
    createdBy: auth.userId,
    createdAt: now,
    updatedAt: now,
  };
  const db = database(env);
  await writeUnique(
    () =>
      db.batch([
        db.insert(connections).values(row),
        auditInsert(env, auth, {
          action: "connection.create",
          targetType: "connection",
          targetId: row.id,
          details: { name: row.name, kind: row.kind },
        }),
      ]),
    `a connection named '${input.name}' already exists`,
  );
  return connectionRecord(row);
}

async function findConnection(
  env: Env,
  auth: AuthContext,
  ref: { connection_id?: string; name?: string },
): Promise<ConnectionRow> {
  if (!ref.connection_id && !ref.name)
    throw invalidInput(["body", "connection_id"], "Either connection_id or name must be provided", "missing");
  const where = ref.connection_id ? eq(connections.id, ref.connection_id) : eq(connections.name, ref.name ?? "");
  const rows = await database(env)
    .select()
    .from(connections)
    .where(and(where, eq(connections.orgId, auth.orgId)))
    .limit(1);
  if (!rows[0]) throw notFound("connection");
  return rows[0];
}

export async function updateConnection(env: Env, auth: AuthContext, input: ConnectionUpdateInput) {
  const row = await findConnection(env, auth, input);
  const baseUrl = input.base_url !== undefined ? checkedBaseUrl(env, input.base_url) : row.baseUrl;
  const newSecret = input.secret ?? input.api_key;
  // The stored secret was given for the old address: a new address (host, port or path) gets it
  // only when it is sent again, so whoever may edit a connection cannot redirect a secret they never saw.
  if (
    effectiveUrl(row.kind, baseUrl) !== effectiveUrl(row.kind, row.baseUrl) &&
    row.secretSealed &&
    !newSecret &&
    !input.clear_secret
  ) {
    throw baseUrlIssue(
      "changing the URL of a connection that has a secret needs the secret again: send `secret` (or `clear_secret: true` to drop it)",
    );
  }
  const secret = await sealed(env, newSecret);
  const changes: Partial<ConnectionRow> = {
    name: input.new_name ?? row.name,
    baseUrl,
    models: modelsFrom(input, row.models),
    settings: input.settings ?? row.settings,
    updatedAt: new Date().toISOString(),
  };
  if (secret) Object.assign(changes, secret);
  else if (input.clear_secret) Object.assign(changes, { secretSealed: null, secretLastFour: null });
  const changed = Object.keys(input).filter((k) => !["connection_id", "secret", "api_key"].includes(k));
  if (input.secret ?? input.api_key) changed.push("secret");
  const db = database(env);
  await writeUnique(
    () =>
      db.batch([
        db.update(connections).set(changes).where(eq(connections.id, row.id)),
        auditInsert(env, auth, {
          action: "connection.update",
          targetType: "connection",
          targetId: row.id,
          details: { name: changes.name, fields: changed },
        }),
      ]),
    `a connection named '${input.new_name}' already exists`,
  );
  return connectionRecord({ ...row, ...changes });
}

export async function deleteConnection(
  env: Env,
  auth: AuthContext,
  ref: { connection_id?: string; name?: string },
): Promise<void> {
  const row = await findConnection(env, auth, ref);
  const db = database(env);
  await db.batch([
    db.delete(connections).where(eq(connections.id, row.id)),
    auditInsert(env, auth, {
      action: "connection.delete",
      targetType: "connection",
      targetId: row.id,
      details: { name: row.name },
    }),
  ]);
}

export async function listConnections(env: Env, auth: AuthContext) {
  const rows = await database(env)
    .select()
    .from(connections)
    .where(eq(connections.orgId, auth.orgId))
    .orderBy(connections.name);
  return rows.map(connectionRecord);
}

/** A connection with its secret decrypted, for the provider layer only. Never put this in a response. */
export interface ResolvedConnection {
  id: string;
  name: string;
  kind: ConnectionKind;
  baseUrl: string | null;
  secret: string | null;
  models: ConnectionModels;
  settings: Record<string, unknown>;
}

async function resolved(env: Env, row: ConnectionRow): Promise<ResolvedConnection> {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind as ConnectionKind,
    baseUrl: row.baseUrl,
    secret: row.secretSealed ? await decryptSecret(row.secretSealed, requireSecret(env, "ENCRYPTION_KEY")) : null,
    models: row.models,
    settings: row.settings,
  };
}

/** Looks up an organization's connection by name and decrypts its secret for one call. */
export async function resolveConnection(env: Env, orgId: string, name: string): Promise<ResolvedConnection | null> {
  const rows = await database(env)
    .select()
    .from(connections)
    .where(and(eq(connections.orgId, orgId), eq(connections.name, name)))
    .limit(1);
  return rows[0] ? resolved(env, rows[0]) : null;
}

/** The organization's connections of the given kinds, secrets decrypted, oldest first. */
export async function resolveConnectionsOfKind(
  env: Env,
  orgId: string,
  kinds: readonly ConnectionKind[],
): Promise<ResolvedConnection[]> {
  const rows = await database(env)
    .select()
    .from(connections)
    .where(eq(connections.orgId, orgId))
    .orderBy(connections.createdAt);
  return Promise.all(
    rows.filter((row) => (kinds as readonly string[]).includes(row.kind)).map((row) => resolved(env, row)),
  );
}
