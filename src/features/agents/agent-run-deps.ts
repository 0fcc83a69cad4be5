import type { Env } from "../../env";
import type { ProviderDeps } from "../../providers/registry";
import { nodeServicesProvider, type NodeServices } from "../pipelines/pipeline-services";

/**
 * What an AgentRunObject reaches outside itself: the services its tools call (the same ones
 * pipeline nodes use) and the provider seam (`fetch`) its model goes through. Production passes
 * the real ones; tests replace `create` with fakes speaking the real wire formats, as
 * `nodeServicesProvider` does for pipelines, instead of mocking modules.
 */
export interface AgentRunDeps {
  services: NodeServices;
  providers: ProviderDeps;
}

export const agentRunDepsProvider: { create: (env: Env) => AgentRunDeps } = {
  create: (env) => ({ services: nodeServicesProvider.create(env), providers: {} }),
};
