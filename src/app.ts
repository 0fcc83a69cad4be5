import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "./env";
import { withOverrides, type Deps } from "./deps";
import { renderError, renderNotFound } from "./lib/render-error";
import { requestId } from "./middleware/request-id";
import { securityHeaders } from "./middleware/security-headers";
import { accessLog } from "./middleware/access-log";
import { bodyWarnings } from "./middleware/warnings";
import { registerAuthRoutes } from "./features/auth/auth.routes";
import { registerAdminRoutes } from "./features/admin/admin.routes";
import { registerConnectionRoutes } from "./features/connections/connections.routes";
import { registerAgentRoutes } from "./features/agents/agents.routes";
import { registerAgentV1Routes } from "./features/agents/agents-v1.routes";
import { registerDocsRoutes } from "./features/docs/docs.routes";
import { registerHomeRoutes } from "./features/home/home.routes";
import { registerChatbotRoutes } from "./features/chatbots/chatbots.routes";
import { registerPipelineRoutes } from "./features/pipelines/pipelines.routes";
import { registerTransformationRoutes } from "./features/transformations/transformations.routes";
import { registerKnowledgeBaseRoutes } from "./features/knowledge-bases/knowledge-bases.routes";

/**
 * Builds the Hono app: middleware, the two error renderers, and every feature's routes. The Worker
 * runs it with the production implementations; tests pass fakes for some (`createApp({ chatbotServices })`).
 */
export function createApp(overrides: Partial<Deps> = {}): OpenAPIHono<AppBindings> {
  const deps = withOverrides(overrides);
  const app = new OpenAPIHono<AppBindings>({ strict: true });
  app.use("*", async (c, next) => {
    c.set("deps", deps);
    await next();
  });
  app.use("*", securityHeaders);
  app.use("*", requestId);
  app.use("*", accessLog);
  app.use("*", bodyWarnings);
  app.onError(renderError);
  app.notFound(renderNotFound);

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    description: "Group A: an API key (`sk_...`). Group B: an access token from /auth/login, or an API key.",
  });

  registerAuthRoutes(app);
  registerAdminRoutes(app);
  registerConnectionRoutes(app);
  registerAgentRoutes(app);
  registerAgentV1Routes(app);
  registerDocsRoutes(app);
  registerHomeRoutes(app);
  registerChatbotRoutes(app);
  registerPipelineRoutes(app);
  registerTransformationRoutes(app);
  registerKnowledgeBaseRoutes(app);
  return app;
}
