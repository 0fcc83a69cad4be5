import { createApp } from "./app";

const app = createApp();

export default app;
export { ConversationObject } from "./durable-objects/conversation-object";
export { PipelineRunObject } from "./durable-objects/pipeline-run-object";
export { KnowledgeBaseIndex } from "./features/knowledge-bases/index/knowledge-base-index";
export { AgentRunObject } from "./durable-objects/agent-run-object";
