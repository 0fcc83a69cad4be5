import type { AuthContext, Env } from "../../env";
import { resolveConnection, resolveConnectionsOfKind } from "../connections/connections.service";
import type { ConnectionKind } from "../connections/connections.schemas";
import { EXTRACTIVE_MODEL, extractAnswer, NO_SOURCES } from "../../providers/extractive";
import { chatModelFor, type ProviderDeps } from "../../providers/registry";
import type { ChatModel, ChatRequest, ChatResult, ChatStreamEvent, ToolCall } from "../../providers/types";
import type { AgentDefinition } from "./agent-definition";

/** Marks the offline answer, so nobody takes quoted sentences for a generated reply. */
export const EXTRACTIVE_LABEL =
  "(extractive answer by loom/extractive: sentences quoted from the agent's knowledge bases)";

/**
 * The offline built-in as an agent: its first turn searches every knowledge-base tool with the
 * user's request, its second quotes the sentences of the results that best cover it. No model,
 * no network: `npm start` alone runs an agent with knowledge-base tools.
 */
export class ExtractiveAgentModel implements ChatModel {
  readonly model = EXTRACTIVE_MODEL;

  constructor(private readonly knowledgeBaseTools: string[]) {}

  async complete(request: ChatRequest): Promise<ChatResult> {
    const lastUser = request.messages.map((m) => m.role).lastIndexOf("user");
    const question = request.messages[lastUser]?.content ?? "";
    const after = request.messages.slice(lastUser + 1);
    const searched = after.some((m) => m.role === "tool");
    if (!searched && this.knowledgeBaseTools.length > 0) {
      const toolCalls: ToolCall[] = this.knowledgeBaseTools.map((name, i) => ({
        id: `extractive_${lastUser}_${i}`,
        name,
        arguments: { query: question.slice(0, 2000) },
      }));
      return { text: "", toolCalls, usage: { input_tokens: 0, output_tokens: 0 }, model: this.model };
    }
    const passages = after
      .filter((m) => m.role === "tool")
      .flatMap((m) => m.content.split(/\n\n(?=\[\d+\] )/))
      .map((p) => p.replace(/^\[\d+\] /, ""));
    const text =
      passages.length === 0 ? NO_SOURCES : `${extractAnswer(question, passages).text}\n\n${EXTRACTIVE_LABEL}`;
    return { text, toolCalls: [], usage: { input_tokens: 0, output_tokens: 0 }, model: this.model };
  }

  async *stream(request: ChatRequest): AsyncIterable<ChatStreamEvent> {
    const result = await this.complete(request);
    if (result.text) yield { type: "text", text: result.text };
    for (const call of result.toolCalls) yield { type: "tool_call", call };
    yield { type: "done", result };
  }
}

const KINDS: ConnectionKind[] = ["openai", "anthropic", "workers_ai"];

/**
 * The agent's model: `llm_client_key.provider` names a connection of the owner's organization
 * (by name, else the first of that kind), `model_id` its model; `loom`/`extractive` is offline.
 */
export async function agentChatModel(
  env: Env,
  auth: AuthContext,
  definition: AgentDefinition,
  deps: ProviderDeps,
): Promise<ChatModel> {
  const { provider, model_id: modelId } = definition.llm;
  if (provider === "loom" && modelId === "extractive") {
    return new ExtractiveAgentModel(definition.tools.filter((t) => t.kind === "knowledge_base").map((t) => t.callName));
  }
  let connection = provider;
  if (!(await resolveConnection(env, auth.orgId, provider)) && (KINDS as string[]).includes(provider)) {
    const ofKind = await resolveConnectionsOfKind(env, auth.orgId, [provider as ConnectionKind]);
    if (ofKind[0]) connection = ofKind[0].name;
  }
  return chatModelFor(env, auth, `${connection}/${modelId}`, { ...deps, purpose: "this agent" });
}
