import { createApp } from "./app";

const app = createApp();

export default app;
export { PipelineRunObject } from "./durable-objects/pipeline-run-object";
export { KnowledgeBaseIndex } from "./durable-objects/knowledge-base-index";
