import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database } from "../../db/client";
import { users } from "../../db/schema/identity";
import type { RunStatus } from "../../db/schema/pipelines";
import { AppError, badRequest, conflict, notFound } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { intSetting } from "../../lib/config";
import type { PipelineRunObject, RunInit, RunView } from "../../durable-objects/pipeline-run-object";
import { rpcStub, type RpcSurface } from "../../durable-objects/rpc-stub";
import type { PipelineGraph } from "./pipeline-graph";
import { NodeFailure } from "./node-failure";
import type { SubPipelineRequest, SubPipelineResult } from "./pipeline-services";
import { loadPipeline } from "./pipeline-records";
import { admitChildRun, admitRootRuns, setIndexedStatus } from "./run-admission";
import { MAX_INPUT_BYTES } from "./pipelines.schemas";
import { assertCanRun } from "./run-permissions";
import { SETTLED } from "./run-state";

/** One run, one object: the run id names it. */
export function runStub(env: Env, runId: string): RpcSurface<PipelineRunObject> {
  return rpcStub(env.PIPELINE_RUNS, runId);
}

const syncWaitMs = (env: Env): number => intSetting(env.PIPELINE_SYNC_WAIT_SECONDS, 120) * 1000;

/** Checks the caller's inputs against the input nodes: every required one given, types right, none unknown. */
export function coerceInputs(graph: PipelineGraph, inputs: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const known = new Set<string>();
  for (const node of graph.nodes) {
    if (node.type !== "input") continue;
    const { name, type, required } = node.config;
    known.add(name);
    const field = `inputs.${name}`;
    let value = inputs[name];
    if (value === undefined || value === null) {
      if (node.config.default !== undefined) value = node.config.default;
      else if (required) throw badRequest(`${field}: missing (input node ${node.id} requires it)`);
      else {
        out[name] = null;
        continue;
      }
    }
    switch (type) {
      case "text":
        if (typeof value === "number" || typeof value === "boolean") value = String(value);
        if (typeof value !== "string") throw badRequest(`${field}: must be text (input node ${node.id})`);
        break;
      case "number": {
        const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
        if (typeof n !== "number" || !Number.isFinite(n))
          throw badRequest(`${field}: must be a number (input node ${node.id})`);
        value = n;
        break;
      }
      case "boolean":
        if (value === "true" || value === "false") value = value === "true";
        if (typeof value !== "boolean") throw badRequest(`${field}: must be true or false (input node ${node.id})`);
        break;
      case "file": {
        const isFile =
          typeof value === "object" &&
          value !== null &&
          typeof (value as { raw_bytes?: unknown }).raw_bytes === "string";
        if (!isFile && typeof value !== "string")
          throw badRequest(`${field}: must be a file ({type: "file", raw_bytes}) or text (input node ${node.id})`);
        break;
      }
      case "json":
        break;
    }
    out[name] = value;
  }
  for (const key of Object.keys(inputs))
    if (!known.has(key)) throw badRequest(`inputs.${key}: the pipeline has no input named "${key}"`);
  return out;
}

function isFilePart(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { type?: unknown }).type === "file" &&
    typeof (value as { raw_bytes?: unknown }).raw_bytes === "string"
  );
}

/**
 * A run request's inputs with its top-level file parts (multipart, a part named after the file
 * input it fills, as the editor's SDK sends them). A name given both ways is ambiguous: a 400.
 */
export function withFileParts(
  given: Record<string, unknown>,
  topLevel: Record<string, unknown>,
): Record<string, unknown> {
  const inputs = { ...given };
  for (const [name, value] of Object.entries(topLevel)) {
    if (!isFilePart(value)) continue;
    if (name in given) throw badRequest(`${name}: given both as a file part and in inputs`);
    inputs[name] = value;
  }
  // Parts are not bounded by the `inputs` field's schema; together they must fit the same bound.
  if (JSON.stringify(inputs).length > MAX_INPUT_BYTES)
    throw badRequest(`inputs: with the file parts, must serialize to at most ${MAX_INPUT_BYTES} bytes`);
  return inputs;
}

interface StartOptions {
  background: boolean;
  runId: string;
  depth?: number;
  startDelayMs?: number;
}

type LoadedPipeline = Awaited<ReturnType<typeof loadPipeline>>;

/**
 * Creates the run object of a run already admitted to the index (`run-admission.ts`). If the
 * object cannot be created, the index row is marked failed so it does not hold a slot forever.
 */
async function startRun(
  env: Env,
  auth: AuthContext,
  pipeline: LoadedPipeline,
  inputs: Record<string, unknown>,
  options: StartOptions,
): Promise<RunView> {
  const runId = options.runId;
  const init: RunInit = {
    runId,
    pipelineId: pipeline._id,
    auth: { userId: auth.userId, orgId: auth.orgId, role: auth.role, via: auth.via },
    graph: pipeline.graph,
    inputs,
    maxSteps: pipeline.settings.max_steps,
    nodeTimeoutMs: pipeline.settings.node_timeout_seconds * 1000,
    depth: options.depth ?? 0,
    background: options.background,
    startDelayMs: options.startDelayMs,
  };
  try {
    return await runStub(env, runId).start(init);
  } catch (error) {
    await setIndexedStatus(env, runId, "failed", "the run could not be started").catch(() => undefined);
    throw error;
  }
}

/** The answer of a run request: outputs when it completed, else the run id and its state. */
export function runAnswer(view: RunView) {
  if (view.status === "completed") return { status: "success" as const, run_id: view.run_id, outputs: view.outputs };
  if (view.status === "failed" || view.status === "terminated")
    return { status: "failed" as const, run_id: view.run_id, state: view.status, error: view.error };
  return { status: "success" as const, run_id: view.run_id, state: view.status, outputs: view.outputs };
}

export interface StartRunOptions {
  background?: boolean;
  /** How long to wait for the run to pause or finish; past it the answer carries the run id and state "running". */
  waitMs?: number;
  /** Background runs only: start this many milliseconds from now. */
  startDelayMs?: number;
}

/** Starts one run of a pipeline the caller may see; waits for it unless it is a background run. */
export async function startPipelineRun(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  rawInputs: Record<string, unknown>,
  options: StartRunOptions = {},
): Promise<RunView> {
  assertCanRun(auth);
  const pipeline = await loadPipeline(env, auth, pipelineId);
  const inputs = coerceInputs(pipeline.graph, rawInputs);
  const runId = newId();
  await admitRootRuns(env, auth, pipeline._id, [runId]);
  const view = await startRun(env, auth, pipeline, inputs, {
    background: options.background ?? false,
    runId,
    startDelayMs: options.startDelayMs,
  });
  if (options.background) return view;
  return (await runStub(env, view.run_id).waitUntilSettled(options.waitMs ?? syncWaitMs(env))) ?? view;
}

export interface PipelineRunOutcome {
  run_id: string;
  status: RunStatus;
  outputs: Record<string, unknown>;
  error: string | null;
}

/**
 * Runs a pipeline with inputs for a caller and waits for its outputs: the entry point for other
 * features (chatbots). Throws AppError for bad input (400), an unknown pipeline (404) or the
 * concurrency limit (429); a run that fails answers `status: "failed"` with its error.
 */
export async function runPipeline(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  inputs: Record<string, unknown>,
  options: { waitMs?: number } = {},
): Promise<PipelineRunOutcome> {
  const view = await startPipelineRun(env, auth, pipelineId, inputs, { waitMs: options.waitMs });
  return { run_id: view.run_id, status: view.status, outputs: view.outputs, error: view.error };
}

export interface UserPipelineRun {
  orgId: string;
  /** Whose rights the run has (a chatbot's owner, for instance). */
  userId: string;
  pipelineId: string;
  inputs: Record<string, unknown>;
  /** Aborting terminates the run. */
  signal?: AbortSignal;
  waitMs?: number;
}

/**
 * Runs a pipeline for a user of an organization and answers its outputs by name: the shape
 * chatbots call. The user's current role is read (a removed or suspended user cannot run
 * anything). A run that does not complete is an AppError naming the run and how it ended.
 */
export async function runPipelineForUser(env: Env, input: UserPipelineRun): Promise<Record<string, unknown>> {
  const rows = await database(env)
    .select({ role: users.role, suspended: users.suspended })
    .from(users)
    .where(and(eq(users.id, input.userId), eq(users.orgId, input.orgId)))
    .limit(1);
  if (!rows[0] || rows[0].suspended) throw notFound("pipeline");
  const auth: AuthContext = { userId: input.userId, orgId: input.orgId, role: rows[0].role, via: "token" };
  // Started in the foreground (driven at once), then waited on here, so an abort can terminate it.
  const started = await startPipelineRun(env, auth, input.pipelineId, input.inputs, { waitMs: 0 });
  const stub = runStub(env, started.run_id);
  const onAbort = () => void stub.terminate();
  input.signal?.addEventListener("abort", onAbort);
  try {
    const view = (await stub.waitUntilSettled(input.waitMs ?? syncWaitMs(env))) ?? started;
    if (view.status === "completed") return view.outputs;
    const how =
      view.status === "paused"
        ? "paused (it has an approval node)"
        : view.status === "failed" || view.status === "terminated"
          ? `${view.status}: ${view.error ?? "no error recorded"}`
          : "did not finish in time";
    throw conflict(`pipeline run ${view.run_id} ${how}`);
  } finally {
    input.signal?.removeEventListener("abort", onAbort);
  }
}

/** Starts several background runs; every run's inputs are checked before any starts. */
export async function bulkRunPipeline(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  runs: { inputs: Record<string, unknown> }[],
): Promise<{ status: "success"; run_ids: string[] }> {
  assertCanRun(auth);
  const pipeline = await loadPipeline(env, auth, pipelineId);
  const checked = runs.map((run, i) => {
    try {
      return coerceInputs(pipeline.graph, run.inputs);
    } catch (error) {
      if (error instanceof AppError) throw badRequest(`runs.${i}.${error.message}`);
      throw error;
    }
  });
  const runIds = checked.map(() => newId());
  await admitRootRuns(env, auth, pipeline._id, runIds);
  const views = await Promise.all(
    checked.map((inputs, i) => startRun(env, auth, pipeline, inputs, { background: true, runId: runIds[i] })),
  );
  return { status: "success", run_ids: views.map((v) => v.run_id) };
}

/**
 * Runs a sub-pipeline for a pipeline node: re-attaches to the same child run after a restart.
 * The child is admitted like any run (the organization's concurrency limit) plus the run tree's
 * bounds (depth, runs per root); a refusal fails the node, and with it the parent run.
 */
export async function runChildPipeline(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  rawInputs: Record<string, unknown>,
  request: SubPipelineRequest,
): Promise<SubPipelineResult> {
  const pipeline = await loadPipeline(env, auth, pipelineId);
  const inputs = coerceInputs(pipeline.graph, rawInputs);
  if (request.signal.aborted) throw new NodeFailure("the node was cancelled");
  const admission = await admitChildRun(env, auth, pipeline._id, request.runId, request.parentRunId);
  if (!admission.ok) throw new NodeFailure(`sub-pipeline run refused: ${admission.reason}`);
  const stub = runStub(env, request.runId);
  await startRun(env, auth, pipeline, inputs, { background: false, runId: request.runId, depth: admission.depth });
  const onAbort = () => void stub.terminate();
  request.signal.addEventListener("abort", onAbort);
  // Cancelled while the child was being admitted or started: it must not run on as an orphan.
  if (request.signal.aborted) onAbort();
  try {
    for (;;) {
      const view = await stub.waitUntilSettled(30_000);
      if (!view) throw new NodeFailure(`sub-pipeline run ${request.runId} disappeared`);
      if (SETTLED.has(view.status))
        return { status: view.status === "queued" ? "running" : view.status, outputs: view.outputs, error: view.error };
      if (request.signal.aborted) return { status: "terminated", outputs: {}, error: "cancelled" };
    }
  } finally {
    request.signal.removeEventListener("abort", onAbort);
  }
}

export type RunStreamEvent =
  | { type: "stream" | "result"; run_id: string; output_name: string; output_value: unknown }
  | { type: "error"; run_id: string; state: RunStatus; error: string | null }
  | { type: "paused"; run_id: string; state: "paused" };

/**
 * Server-sent events of a run that has started: a `stream` event as each output is produced,
 * then, when the run completes, a `result` event per output with its final value. A run that
 * pauses ends the stream with a `paused` event; one that fails or is terminated, with `error`.
 */
export async function* streamRun(
  env: Env,
  started: RunView,
  maxWaitMs = syncWaitMs(env),
): AsyncGenerator<RunStreamEvent> {
  const stub = runStub(env, started.run_id);
  const sent = new Set<string>();
  const deadline = Date.now() + maxWaitMs;
  let view: RunView | null = started;
  while (view) {
    for (const [name, value] of Object.entries(view.outputs)) {
      if (sent.has(name)) continue;
      sent.add(name);
      yield { type: "stream", run_id: view.run_id, output_name: name, output_value: value };
    }
    if (view.status === "completed") {
      for (const [name, value] of Object.entries(view.outputs))
        yield { type: "result", run_id: view.run_id, output_name: name, output_value: value };
      return;
    }
    if (view.status === "paused") {
      yield { type: "paused", run_id: view.run_id, state: "paused" };
      return;
    }
    if (view.status === "failed" || view.status === "terminated") {
      yield { type: "error", run_id: view.run_id, state: view.status, error: view.error };
      return;
    }
    if (Date.now() >= deadline) return;
    view = await stub.waitForChange(view.version, Math.min(25_000, deadline - Date.now()));
  }
}
