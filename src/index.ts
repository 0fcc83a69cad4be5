import { createApp } from "./app";

const app = createApp();

export default app;
export { ConversationObject } from "./durable-objects/conversation-object";
