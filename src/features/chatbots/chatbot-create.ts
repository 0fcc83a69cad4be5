import { and, eq } from "drizzle-orm";
import type { AuthContext, Env } from "../../env";
import { database, writeUnique } from "../../db/client";
import { chatbots } from "../../db/schema/chatbots";
import { connections } from "../../db/schema/identity";
import { knowledgeBases } from "../../db/schema/knowledge-bases";
import { pipelines } from "../../db/schema/pipelines";
import { badRequest, invalidInput } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { assertCanCreate } from "../../lib/ownership";
import { auditInsert } from "../audit/audit.service";
import { loadPipeline } from "../pipelines/pipelines.service";
import type { ChatbotRow } from "./chatbot-record";
import type { ChatbotCreateInput } from "./chatbots.schemas";
import { accessChanges, chatWorkspaceChanges, deploymentChanges, telephonyChanges } from "./deployment.service";

async function assertModelConnection(env: Env, auth: AuthContext, model: string): Promise<void> {
  const connectionName = model.slice(0, model.indexOf("/"));
  const found = await database(env)
    .select({ id: connections.id })
    .from(connections)
    .where(and(eq(connections.orgId, auth.orgId), eq(connections.name, connectionName)))
    .limit(1);
  if (!found[0]) throw badRequest(`model: no connection named '${connectionName}' in this organization`);
}

async function assertKnowledgeBase(env: Env, auth: AuthContext, kbId: string): Promise<void> {
  const found = await database(env)
    .select({ id: knowledgeBases.id })
    .from(knowledgeBases)
    .where(and(eq(knowledgeBases.id, kbId), eq(knowledgeBases.orgId, auth.orgId)))
    .limit(1);
  if (!found[0]) throw badRequest(`knowledge_base_ids: no knowledge base ${kbId} in this organization`);
}

async function assertPipeline(env: Env, auth: AuthContext, pipelineId: string): Promise<void> {
  const found = await database(env)
    .select({ id: pipelines.id })
    .from(pipelines)
    .where(and(eq(pipelines.id, pipelineId), eq(pipelines.orgId, auth.orgId)))
    .limit(1);
  if (!found[0]) throw badRequest(`pipeline: no pipeline ${pipelineId} in this organization`);
}

/** `pipeline.input` and the SDK's top-level `input` name the same thing; "" is "not set". */
function oneName(field: "input" | "output", nested: string | undefined, top: string | undefined): string | undefined {
  const given = top?.trim() ? top.trim() : undefined;
  if (given !== undefined && nested !== undefined && given !== nested)
    throw badRequest(`${field}: differs from pipeline.${field}; give one`);
  return given ?? nested;
}

/**
 * The pipeline's input and output a chatbot uses, by name. A caller may name an input or output
 * node by its name or by its node id (the hosted SDK's "node name", such as `input_0`). With no
 * input named, a pipeline without a `query` input but with exactly one input uses that one, so a
 * chatbot over such a pipeline answers instead of failing on every message.
 */
async function resolvePipelineNames(
  env: Env,
  auth: AuthContext,
  pipelineId: string,
  input: ChatbotCreateInput,
): Promise<{ input: string | null; output: string | null }> {
  const wantedInput = oneName("input", input.pipeline?.input, input.input);
  const wantedOutput = oneName("output", input.pipeline?.output, input.output);
  const { graph } = await loadPipeline(env, auth, pipelineId);
  const namesOf = (kind: "input" | "output") =>
    graph.nodes.flatMap((n) => (n.type === kind ? [{ id: n.id, name: n.config.name }] : []));
  const find = (kind: "input" | "output", wanted: string): string => {
    const nodes = namesOf(kind);
    const hit = nodes.find((n) => n.name === wanted) ?? nodes.find((n) => n.id === wanted);
    if (!hit)
      throw badRequest(
        `${kind}: the pipeline has no ${kind} named '${wanted}' (its ${kind}s: ${nodes.map((n) => n.name).join(", ") || "none"})`,
      );
    return hit.name;
  };
  const inputs = namesOf("input");
  const defaultInput = inputs.length === 1 && inputs[0].name !== "query" ? inputs[0].name : null;
  return {
    input: wantedInput !== undefined ? find("input", wantedInput) : defaultInput,
    output: wantedOutput !== undefined ? find("output", wantedOutput) : null,
  };
}

/** The option objects of the SDK's `Chatbot.new`, through the same checks as the settings routes. */
async function withOptions(
  env: Env,
  auth: AuthContext,
  row: ChatbotRow,
  input: ChatbotCreateInput,
): Promise<ChatbotRow> {
  let next = row;
  if (input.deployment_options) next = { ...next, ...deploymentChanges(next, input.deployment_options) };
  if (input.access_config) next = { ...next, ...(await accessChanges(next, input.access_config)) };
  if (input.twilio_config) next = { ...next, ...(await telephonyChanges(env, auth, next, input.twilio_config)) };
  if (input.slack_config) next = { ...next, ...(await chatWorkspaceChanges(env, auth, next, input.slack_config)) };
  if (input.deployed) next = { ...next, deployed: true, deployedAt: next.createdAt };
  return next;
}

export async function createChatbot(env: Env, auth: AuthContext, input: ChatbotCreateInput): Promise<ChatbotRow> {
  assertCanCreate(auth);
  const pipelineId = input.pipeline?.id ?? input.pipeline_id ?? null;
  const builtIn =
    input.knowledge_base_ids !== undefined || input.system_prompt !== undefined || input.model !== undefined;
  if (pipelineId && builtIn)
    throw invalidInput(
      ["body", "pipeline"],
      "a chatbot answers through either a pipeline or knowledge bases and a model, not both",
    );
  if (!pipelineId && !(input.knowledge_base_ids?.length || input.model || input.system_prompt)) {
    throw invalidInput(
      ["body", "pipeline"],
      "give either pipeline.id, or knowledge_base_ids, a system_prompt and optionally a model",
      "missing",
    );
  }
  if (!pipelineId && (input.input?.trim() || input.output?.trim()))
    throw badRequest("input and output name a pipeline's input and output; this chatbot has no pipeline");
  if (input.model) await assertModelConnection(env, auth, input.model);
  for (const kbId of new Set(input.knowledge_base_ids ?? [])) await assertKnowledgeBase(env, auth, kbId);
  if (pipelineId) await assertPipeline(env, auth, pipelineId);
  const names = pipelineId ? await resolvePipelineNames(env, auth, pipelineId, input) : { input: null, output: null };
  const now = new Date().toISOString();
  const base: ChatbotRow = {
    id: newId(),
    orgId: auth.orgId,
    ownerId: auth.userId,
    name: input.name,
    description: input.description,
    pipelineId,
    pipelineInput: names.input,
    pipelineOutput: names.output,
    knowledgeBaseIds: [...new Set(input.knowledge_base_ids ?? [])],
    queryOptions: input.query_options ?? {},
    systemPrompt: input.system_prompt ?? "",
    model: input.model ?? null,
    followUpQuestions: input.follow_up_questions,
    browserExtension: input.browser_extension,
    deployed: false,
    deployedAt: null,
    deployment: {},
    access: {},
    rbac: {},
    telephony: {},
    telephonyTokenSealed: null,
    chatworkspace: {},
    chatworkspaceSigningSealed: null,
    chatworkspaceTokenSealed: null,
    createdAt: now,
    updatedAt: now,
  };
  const row = await withOptions(env, auth, base, input);
  const db = database(env);
  await writeUnique(
    () =>
      db.batch([
        db.insert(chatbots).values(row),
        auditInsert(env, auth, {
          action: "chatbot.create",
          targetType: "chatbot",
          targetId: row.id,
          details: { name: row.name },
        }),
      ]),
    `you already have a chatbot named '${input.name}'`,
  );
  return row;
}
