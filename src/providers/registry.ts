import type { AuthContext, Env } from "../env";
import { badRequest, type AppError } from "../lib/errors";
import { modelHostRules } from "../lib/config";
import {
  resolveConnection,
  resolveConnectionsOfKind,
  type ResolvedConnection,
} from "../features/connections/connections.service";
import type { ConnectionKind } from "../features/connections/connections.schemas";
import { AnthropicChatModel } from "./anthropic";
import { COHERE_BASE_URL, CohereReranker } from "./cohere-rerank";
import { EXTRACTIVE_MODEL, ExtractiveAnswerer } from "./extractive";
import {
  DEFAULT_MAX_RETRIES,
  DEFAULT_RETRY_BASE_MS,
  DEFAULT_TIMEOUT_MS,
  transport,
  type FetchLike,
  type ProviderTransport,
} from "./http";
import { OpenAiChatModel, OpenAiEmbedder, OpenAiTranscriber, type OpenAiEndpoint } from "./openai-compatible";
import type { ChatModel, Embedder, Reranker, Transcriber } from "./types";
import {
  BindingRunner,
  RestRunner,
  WORKERS_AI_DEFAULTS,
  WorkersAiChatModel,
  WorkersAiEmbedder,
  WorkersAiReranker,
  WorkersAiTranscriber,
  type AiRunner,
  type WorkersAiBinding,
} from "./workers-ai";

/**
 * Turns model names (`<connection>/<model>`) into provider clients, from the organization's
 * connections. Each call resolves the connection afresh, so its secret is decrypted only for the
 * client built here and lives no longer than the request that uses it.
 */

export type Purpose = "chat" | "embedding" | "rerank" | "transcription";

/** What the edge of the app injects: production passes nothing; tests pass fakes of the real services. */
export interface ProviderDeps {
  fetch?: FetchLike;
  ai?: WorkersAiBinding;
  timeoutMs?: number;
  maxRetries?: number;
  retryBaseMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

/** Which connection kinds can serve each purpose. */
const KINDS: Record<Purpose, readonly ConnectionKind[]> = {
  chat: ["openai", "anthropic", "workers_ai"],
  embedding: ["openai", "workers_ai"],
  // OpenAI-compatible servers (vLLM, TEI, Jina) that serve the Cohere rerank format count when a rerank model is set.
  rerank: ["cohere", "workers_ai", "openai"],
  transcription: ["openai", "workers_ai"],
};

const OPENAI_URL = "https://api.openai.com/v1";
const ANTHROPIC_URL = "https://api.anthropic.com";
const CLOUDFLARE_AI_URL = "https://api.cloudflare.com/client/v4/accounts";

/** Models a connection serves when it names none itself: only for the vendors' own endpoints. */
function vendorDefault(connection: ResolvedConnection, purpose: Purpose): string | undefined {
  const own = connection.models[purpose];
  if (own) return own;
  const official = (url: string | null, expected: string): boolean =>
    !url || url.replace(/\/+$/, "").startsWith(expected);
  switch (connection.kind) {
    case "openai":
      if (!official(connection.baseUrl, OPENAI_URL)) return undefined;
      return (
        { chat: "gpt-4o-mini", embedding: "text-embedding-3-small", transcription: "whisper-1" } as Partial<
          Record<Purpose, string>
        >
      )[purpose];
    case "anthropic":
      return purpose === "chat" ? "claude-3-5-haiku-latest" : undefined;
    case "cohere":
      return purpose === "rerank" ? "rerank-v3.5" : undefined;
    case "workers_ai":
      return WORKERS_AI_DEFAULTS[purpose];
    default:
      return undefined;
  }
}

function kindList(purpose: Purpose): string {
  const kinds = KINDS[purpose].filter((k) => !(purpose === "rerank" && k === "openai"));
  return `${kinds.slice(0, -1).join(", ")} or ${kinds[kinds.length - 1]}`;
}

/** The 400 for a capability with no provider: it says which connection to add, and where. */
export function noProvider(purpose: Purpose, what: string): AppError {
  return badRequest(
    `${what} needs ${purpose === "embedding" ? "an" : "a"} ${purpose} model: add a connection of kind ${kindList(purpose)} (POST /admin/connections/create) or name a model as <connection>/<model>`,
  );
}

function transportFor(
  env: Env,
  connection: { kind: string; name: string },
  secrets: (string | null)[],
  deps: ProviderDeps,
): ProviderTransport {
  return transport({
    provider: connection.kind,
    connection: connection.name,
    rules: modelHostRules(env),
    secrets: secrets.filter((s): s is string => Boolean(s)),
    timeoutMs: deps.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxRetries: deps.maxRetries ?? DEFAULT_MAX_RETRIES,
    retryBaseMs: deps.retryBaseMs ?? DEFAULT_RETRY_BASE_MS,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
    ...(deps.sleep ? { sleep: deps.sleep } : {}),
  });
}

function openAiEndpoint(env: Env, connection: ResolvedConnection, deps: ProviderDeps): OpenAiEndpoint {
  return {
    transport: transportFor(env, connection, [connection.secret], deps),
    baseUrl: connection.baseUrl ?? OPENAI_URL,
    secret: connection.secret,
    connection: connection.name,
  };
}

function aiRunner(env: Env, connection: ResolvedConnection, deps: ProviderDeps): AiRunner {
  const t = transportFor(env, connection, [connection.secret], deps);
  const binding = deps.ai ?? env.AI;
  const accountId = typeof connection.settings.account_id === "string" ? connection.settings.account_id : undefined;
  // An explicit account and token win over the binding: the connection names whose account pays.
  if (accountId && connection.secret) {
    const base = connection.baseUrl ?? `${CLOUDFLARE_AI_URL}/${encodeURIComponent(accountId)}/ai`;
    return new RestRunner(t, connection.name, base, connection.secret);
  }
  if (binding) return new BindingRunner(binding, t, connection.name);
  throw badRequest(
    `connection '${connection.name}' is of kind workers_ai, but this deployment has no AI binding; give the connection settings.account_id and an API token as its secret`,
  );
}

/** Splits `<connection>/<model>`; a bare name is a connection whose default model is meant. */
export function parseModelName(name: string): { connection: string; model?: string } {
  const trimmed = name.trim();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this check refuses.
  if (!trimmed || trimmed.length > 300 || /[\u0000-\u001f]/.test(trimmed))
    throw badRequest(`invalid model name: '${trimmed.slice(0, 80)}'`);
  const slash = trimmed.indexOf("/");
  if (slash < 0) return { connection: trimmed };
  const model = trimmed.slice(slash + 1);
  return { connection: trimmed.slice(0, slash), model: model || undefined };
}

async function pick(
  env: Env,
  orgId: string,
  purpose: Purpose,
  name: string | undefined,
  what: string,
): Promise<{ connection: ResolvedConnection; model: string } | null> {
  if (name) {
    const parsed = parseModelName(name);
    const connection = await resolveConnection(env, orgId, parsed.connection);
    if (!connection)
      throw badRequest(`model '${name}': this organization has no connection named '${parsed.connection}'`);
    if (!KINDS[purpose].includes(connection.kind))
      throw badRequest(
        `model '${name}': connection '${connection.name}' is of kind ${connection.kind}, which does not serve ${purpose} models`,
      );
    const model = parsed.model ?? vendorDefault(connection, purpose);
    if (!model)
      throw badRequest(
        `model '${name}': connection '${connection.name}' has no default ${purpose} model; name one as ${connection.name}/<model>`,
      );
    return { connection, model };
  }
  for (const connection of await resolveConnectionsOfKind(env, orgId, KINDS[purpose])) {
    const model = vendorDefault(connection, purpose);
    if (model) return { connection, model };
  }
  void what;
  return null;
}

export interface ChatModelOptions extends ProviderDeps {
  /** Answer with the offline extractive answerer when the organization has no chat connection. */
  allowExtractive?: boolean;
  /** Names the feature in the 400 when no model can be found ("transform_query"). */
  purpose?: string;
}

export async function chatModelFor(
  env: Env,
  auth: Pick<AuthContext, "orgId">,
  name?: string,
  options: ChatModelOptions = {},
): Promise<ChatModel> {
  const what = options.purpose ?? "this request";
  if (name === EXTRACTIVE_MODEL) {
    if (!options.allowExtractive) throw noProvider("chat", what);
    return new ExtractiveAnswerer();
  }
  const chosen = await pick(env, auth.orgId, "chat", name, what);
  if (!chosen) {
    if (options.allowExtractive) return new ExtractiveAnswerer();
    throw noProvider("chat", what);
  }
  const { connection, model } = chosen;
  switch (connection.kind) {
    case "anthropic":
      return new AnthropicChatModel(
        {
          transport: transportFor(env, connection, [connection.secret], options),
          baseUrl: connection.baseUrl ?? ANTHROPIC_URL,
          secret: connection.secret,
          connection: connection.name,
        },
        model,
      );
    case "workers_ai":
      return new WorkersAiChatModel(aiRunner(env, connection, options), model);
    default:
      return new OpenAiChatModel(openAiEndpoint(env, connection, options), model);
  }
}

export interface EmbedderOptions extends ProviderDeps {
  /** The offline embedder to use when no name is given and the organization has no embedding connection. */
  offline?: () => Embedder;
  purpose?: string;
}

export async function embedderFor(
  env: Env,
  auth: Pick<AuthContext, "orgId">,
  name?: string,
  options: EmbedderOptions = {},
): Promise<Embedder> {
  const offline = options.offline?.();
  if (name && offline && name === offline.model) return offline;
  const chosen = await pick(env, auth.orgId, "embedding", name, options.purpose ?? "this request");
  if (!chosen) {
    if (offline) return offline;
    throw noProvider("embedding", options.purpose ?? "this request");
  }
  const { connection, model } = chosen;
  if (connection.kind === "workers_ai") return new WorkersAiEmbedder(aiRunner(env, connection, options), model);
  const dimensions = Number(connection.settings.embedding_dimensions);
  return new OpenAiEmbedder(
    openAiEndpoint(env, connection, options),
    model,
    Number.isInteger(dimensions) && dimensions > 0 && dimensions <= 8192 ? dimensions : undefined,
  );
}

export interface RerankerOptions extends ProviderDeps {
  /**
   * A credential for this one call (`config.reranking_config.api_key`). It is handed to the client
   * and dropped with it: never stored, never logged, scrubbed from provider error text.
   */
  apiKey?: string;
  purpose?: string;
}

export async function rerankerFor(
  env: Env,
  auth: Pick<AuthContext, "orgId">,
  name?: string,
  options: RerankerOptions = {},
): Promise<Reranker> {
  const what = options.purpose ?? "rerank_documents";
  if (options.apiKey) {
    // With a one-call key the model may name an organization connection (its endpoint is used with
    // this key) or simply a Cohere model, served by Cohere's own API.
    const parsed = name ? parseModelName(name) : { connection: "cohere", model: undefined };
    const connection = name ? await resolveConnection(env, auth.orgId, parsed.connection) : null;
    const usable =
      connection && KINDS.rerank.includes(connection.kind) && connection.kind !== "workers_ai" ? connection : null;
    const model = usable
      ? (parsed.model ?? vendorDefault(usable, "rerank"))
      : name && parsed.model && parsed.connection === "cohere"
        ? parsed.model
        : (name ?? "rerank-v3.5");
    if (!model)
      throw badRequest(`reranking_model '${name}': connection '${parsed.connection}' has no default rerank model`);
    const label = { kind: usable?.kind ?? "cohere", name: usable ? `${usable.name} (request key)` : "request" };
    return new CohereReranker(
      {
        transport: transportFor(env, label, [options.apiKey, usable?.secret ?? null], options),
        baseUrl: usable?.baseUrl ?? COHERE_BASE_URL,
        secret: options.apiKey,
        connection: usable?.name ?? "cohere",
      },
      model,
    );
  }
  const chosen = await pick(env, auth.orgId, "rerank", name, what);
  if (!chosen) throw noProvider("rerank", what);
  const { connection, model } = chosen;
  if (connection.kind === "workers_ai") return new WorkersAiReranker(aiRunner(env, connection, options), model);
  return new CohereReranker(
    {
      transport: transportFor(env, connection, [connection.secret], options),
      baseUrl: connection.baseUrl ?? COHERE_BASE_URL,
      secret: connection.secret,
      connection: connection.name,
    },
    model,
  );
}

export async function transcriberFor(
  env: Env,
  auth: Pick<AuthContext, "orgId">,
  name?: string,
  options: ProviderDeps & { purpose?: string } = {},
): Promise<Transcriber> {
  const what = options.purpose ?? "transcription";
  const chosen = await pick(env, auth.orgId, "transcription", name, what);
  if (!chosen) throw noProvider("transcription", what);
  const { connection, model } = chosen;
  if (connection.kind === "workers_ai") return new WorkersAiTranscriber(aiRunner(env, connection, options), model);
  return new OpenAiTranscriber(openAiEndpoint(env, connection, options), model);
}
