import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { transformations, type TransformationRow } from "../../db/schema/transformations";
import { AppError, badRequest, conflict, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import {
  assertCanCreate,
  assertVisible,
  assertWritable,
  resolveFetchTarget,
  type FetchQueryInput,
  ownedRecordFields,
} from "../../lib/ownership";
import { runSandboxed, sandboxLimits } from "../../sandbox/sandbox";
import type { SandboxOutcome, SandboxTask } from "../../sandbox/sandbox.types";
import { enforceLimit } from "../../middleware/limits";
import { resolveFunctionName } from "./function-name";
import { compileIoSchema, type IoSchema } from "./io-schema";
import { validateAgainst } from "./schema-validate";
import type { TransformationCreateInput } from "./transformations.schemas";

const WHAT = "transformation";

/** The record as the API shows it: `_id`, camelCase ownership fields, the hosted SDK's field names. */
export interface TransformationRecord {
  _id: string;
  name: string;
  description: string;
  function_name: string;
  function: string;
  inputs: IoSchema;
  outputs: IoSchema;
  language: "python" | "javascript";
  ownerId: string;
  orgId: string;
  createdAt: string;
  updatedAt: string;
}

function toRecord(row: TransformationRow): TransformationRecord {
  return {
    ...ownedRecordFields(row),
    function_name: row.functionName,
    function: row.source,
    inputs: row.inputSchema,
    outputs: row.outputSchema,
    language: row.language,
  };
}

/** Turns a sandbox failure into the one clear 400 the caller sees. */
/** A run's failure is the user's (400), except a deployment that offers no sandbox (503). */
function sandboxError(outcome: Extract<SandboxOutcome, { ok: false }>): AppError {
  return outcome.failure === "unavailable" ? new AppError("unavailable", outcome.message) : badRequest(outcome.message);
}

/**
 * Every sandbox task goes through here: counted per organization (SANDBOX_LIMITER), since each
 * one spends up to the fuel budget of CPU, whether from the API, a pipeline node or a chatbot's
 * pipeline.
 */
async function runMetered(env: Env, auth: AuthContext, task: SandboxTask): Promise<SandboxOutcome> {
  await enforceLimit(
    env.SANDBOX_LIMITER,
    `sandbox:${auth.orgId}`,
    "your organization has started too many transformation runs this minute; wait a minute and try again",
  );
  return runSandboxed(env, task, auth.orgId);
}

function schemaOrThrow(schema: IoSchema, field: string) {
  const compiled = compileIoSchema(schema, field);
  if ("problem" in compiled) throw badRequest(compiled.problem);
  return compiled.schema;
}

export async function createTransformation(
  env: Env,
  auth: AuthContext,
  body: TransformationCreateInput,
): Promise<string> {
  assertCanCreate(auth);
  const inputSchema = body.input_schema ?? body.inputs ?? {};
  const outputSchema = body.output_schema ?? body.outputs ?? {};
  schemaOrThrow(inputSchema, "input_schema");
  schemaOrThrow(outputSchema, "output_schema");
  const functionName = resolveFunctionName(body.language, body.function, body.function_name);

  const db = database(env);
  const taken = await db
    .select({ id: transformations.id })
    .from(transformations)
    .where(and(eq(transformations.ownerId, auth.userId), eq(transformations.name, body.name)))
    .limit(1);
  if (taken[0]) throw conflict(`a transformation named '${body.name}' already exists`);

  // Parse the source and look for the function without running any of it.
  const checked = await runMetered(env, auth, {
    kind: "check",
    language: body.language,
    source: body.function,
    functionName,
    limits: sandboxLimits(env),
  });
  if (!checked.ok) throw sandboxError(checked);

  const id = newId();
  const now = new Date().toISOString();
  try {
    await db.insert(transformations).values({
      id,
      orgId: auth.orgId,
      ownerId: auth.userId,
      name: body.name,
      description: body.description,
      functionName,
      source: body.function,
      language: body.language,
      inputSchema,
      outputSchema,
      createdAt: now,
      updatedAt: now,
    });
  } catch (error) {
    // Two creations racing for one name: the unique index decides.
    if (/UNIQUE/i.test(String(error))) throw conflict(`a transformation named '${body.name}' already exists`);
    throw error;
  }
  return id;
}

async function loadVisible(env: Env, auth: AuthContext, id: string): Promise<TransformationRow> {
  const rows = await database(env).select().from(transformations).where(eq(transformations.id, id)).limit(1);
  return assertVisible(rows[0], auth, WHAT);
}

export async function getTransformation(
  env: Env,
  auth: AuthContext,
  query: FetchQueryInput,
): Promise<TransformationRecord> {
  const target = await resolveFetchTarget(env, auth, query);
  if ("id" in target) return toRecord(await loadVisible(env, auth, target.id));
  const rows = await database(env)
    .select()
    .from(transformations)
    .where(
      and(
        eq(transformations.orgId, auth.orgId),
        eq(transformations.ownerId, target.ownerId),
        eq(transformations.name, target.name),
      ),
    )
    .limit(1);
  if (!rows[0]) throw notFound(WHAT);
  return toRecord(rows[0]);
}

/** The caller's own transformations, or with `includeShared` every one in the organization. */
export async function listTransformations(
  env: Env,
  auth: AuthContext,
  includeShared: boolean,
): Promise<TransformationRecord[]> {
  const where = includeShared
    ? eq(transformations.orgId, auth.orgId)
    : and(eq(transformations.orgId, auth.orgId), eq(transformations.ownerId, auth.userId));
  const rows = await database(env)
    .select()
    .from(transformations)
    .where(where)
    .orderBy(transformations.createdAt, transformations.id)
    .limit(1000);
  return rows.map(toRecord);
}

export async function deleteTransformation(env: Env, auth: AuthContext, id: string): Promise<void> {
  const row = await loadVisible(env, auth, id);
  assertWritable(row, auth, WHAT);
  await database(env)
    .delete(transformations)
    .where(and(eq(transformations.id, id), eq(transformations.orgId, auth.orgId)));
}

/**
 * Runs a transformation the caller may see on `inputs`: validates the inputs, runs the
 * function in a fresh sandboxed interpreter, validates and returns its output object.
 * Every failure is an AppError (400 naming the field or the limit, 404 when not visible).
 * Pipelines call this for their transformation steps.
 */
export async function runTransformation(
  env: Env,
  auth: AuthContext,
  id: string,
  inputs: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  return (await runTransformationWithLogs(env, auth, id, inputs)).result;
}

/** The same, with what the function printed (`console.*` / `print`), for the run route. */
export async function runTransformationWithLogs(
  env: Env,
  auth: AuthContext,
  id: string,
  inputs: Record<string, unknown>,
): Promise<{ result: Record<string, unknown>; logs: string[] }> {
  const row = await loadVisible(env, auth, id);
  const inputSchema = schemaOrThrow(row.inputSchema, "input_schema");
  const outputSchema = schemaOrThrow(row.outputSchema, "output_schema");
  const inputProblem = validateAgainst(inputSchema, inputs, "inputs");
  if (inputProblem) throw badRequest(inputProblem);

  const outcome = await runMetered(env, auth, {
    kind: "run",
    language: row.language,
    source: row.source,
    functionName: row.functionName,
    inputsJson: JSON.stringify(inputs),
    limits: sandboxLimits(env),
  });
  if (!outcome.ok) throw sandboxError(outcome);
  let result: unknown;
  try {
    result = JSON.parse(outcome.outputJson ?? "null");
  } catch {
    // MicroPython's json.dumps prints what it cannot encode (sets, NaN) instead of refusing.
    throw badRequest("transformation must return a JSON object");
  }
  if (typeof result !== "object" || result === null || Array.isArray(result))
    throw badRequest("transformation must return a JSON object");
  const outputProblem = validateAgainst(outputSchema, result, "outputs");
  if (outputProblem) throw badRequest(outputProblem);
  return { result: result as Record<string, unknown>, logs: outcome.logs ?? [] };
}
