import { WorkerEntrypoint } from "cloudflare:workers";
import type { Env } from "./env";
import { createApp } from "./app";

const app = createApp();

export default app;

/**
 * The same app as a named entrypoint, for `npm start` only (scripts/start.mjs): Miniflare's
 * socket for a named entrypoint leads straight into this Worker, where its default entry passes
 * every request through three helper Workers first (Miniflare's entry, the assets proxy and the
 * assets router, which with `run_worker_first` only hands it on), ~1 ms of CPU a request. A
 * deployment never routes requests here: only a service binding that names it could.
 */
export class LoomHttp extends WorkerEntrypoint<Env> {
  override fetch(request: Request): Response | Promise<Response> {
    return app.fetch(request, this.env, this.ctx);
  }
}
export { ConversationObject } from "./durable-objects/conversation-object";
export { PipelineRunObject } from "./durable-objects/pipeline-run-object";
export { KnowledgeBaseIndex } from "./features/knowledge-bases/index/knowledge-base-index";
export { AgentRunObject } from "./durable-objects/agent-run-object";
