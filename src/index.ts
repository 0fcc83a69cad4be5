import { createApp } from "./app";

const app = createApp();

export default app;
export { ConversationObject } from "./durable-objects/conversation-object";
export { KnowledgeBaseIndex } from "./durable-objects/knowledge-base-index";
