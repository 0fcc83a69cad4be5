import { createApp } from "./app";

const app = createApp();

export default app;
export { KnowledgeBaseIndex } from "./durable-objects/knowledge-base-index";
