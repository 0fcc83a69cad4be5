import type { ProviderDeps } from "../../providers/registry";
import type { NodeServices } from "../pipelines/pipeline-services";

/**
 * What an AgentRunObject reaches outside itself: the services its tools call (the same ones
 * pipeline nodes use) and the provider seam (`fetch`) its model goes through. The object takes
 * both from its `Deps` (src/deps.ts).
 */
export interface AgentRunDeps {
  services: NodeServices;
  providers: ProviderDeps;
}
