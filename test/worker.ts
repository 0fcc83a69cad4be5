/**
 * The Worker as the tests run it (vitest.config.ts `main`): src/index.ts's app and Durable Objects,
 * built through the same `createApp(overrides)` and object constructors as production, with the
 * implementations the running test file chose (test/test-deps.ts) or the production ones.
 */
import { createApp } from "../src/app";
import { withOverrides } from "../src/deps";
import type { Env } from "../src/env";
import { AgentRunObject as ProductionAgentRunObject } from "../src/durable-objects/agent-run-object";
import { PipelineRunObject as ProductionPipelineRunObject } from "../src/durable-objects/pipeline-run-object";
import { agentRunChoice, everywhereChoice, type DepsChoice } from "./test-deps";

export { ConversationObject, KnowledgeBaseIndex } from "../src/index";

const production = createApp();
/** One app per choice: building the app registers every route, too slow to repeat per request. */
const apps = new WeakMap<DepsChoice, ReturnType<typeof createApp>>();

function appFor(env: Env): ReturnType<typeof createApp> {
  const choice = everywhereChoice();
  if (!choice) return production;
  let app = apps.get(choice);
  if (!app) {
    app = createApp(choice(env));
    apps.set(choice, app);
  }
  return app;
}

export default {
  fetch: (request: Request, env: Env, ctx: ExecutionContext) => appFor(env).fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;

export class PipelineRunObject extends ProductionPipelineRunObject {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, withOverrides(everywhereChoice()?.(env)));
  }
}

export class AgentRunObject extends ProductionAgentRunObject {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, withOverrides(agentRunChoice()?.(env)));
  }
}
