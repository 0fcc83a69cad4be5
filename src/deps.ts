import type { Env } from "./env";
import type { ProviderDeps } from "./providers/registry";
import type { FetchFunction } from "./lib/egress";
import { productionChatbotServices, type ChatbotServicesFactory } from "./features/chatbots/chatbot-services";
import { productionNodeServices, type NodeServices } from "./features/pipelines/pipeline-services";

/**
 * Every implementation Loom chooses rather than hard-wires, chosen once at the edge: `createApp(overrides)`
 * for the Worker (handlers read it as `c.get("deps")`), the constructor of each run object (the runtime
 * passes none: production). Tests pass fakes there; src/ holds no module global for them to swap.
 */
export interface Deps {
  /**
   * How model providers are reached: the network under the egress checks (`fetch`), retries, the
   * Workers AI binding. Production leaves them unset (the global fetch behind the SSRF guard).
   */
  providers: ProviderDeps;
  /**
   * The network outside sources (encyclopedia, video, preprint) and indexed web pages are read
   * through, always behind the SSRF guard (`guardedFetch`). Production leaves it unset: the global fetch.
   */
  fetch?: FetchFunction;
  /** What pipeline nodes and agent tools call: models, knowledge bases, transformations, sub-pipelines. */
  nodeServices: (env: Env) => NodeServices;
  /** What chatbots answer with: models, knowledge bases, pipelines, transcription, the workspace's web API. */
  chatbotServices: ChatbotServicesFactory;
}

/**
 * The production implementations with some replaced: what `createApp(overrides)` and the objects
 * use. The production services reach models through whichever `providers` were chosen.
 */
export function withOverrides(overrides: Partial<Deps> = {}): Deps {
  const providers = overrides.providers ?? Object.freeze({});
  return {
    providers,
    ...(overrides.fetch ? { fetch: overrides.fetch } : {}),
    nodeServices: overrides.nodeServices ?? ((env) => productionNodeServices(env, providers)),
    chatbotServices: overrides.chatbotServices ?? ((env) => productionChatbotServices(env, providers)),
  };
}

/** The real implementations. Frozen: a test that wants others passes them to `createApp` instead. */
export const productionDeps: Readonly<Deps> = Object.freeze(withOverrides());
