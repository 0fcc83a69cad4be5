import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { ID_PATTERN } from "../../lib/ids";
import { escapeHtml, htmlPage } from "../../lib/pages";
import { AppError } from "../../lib/errors";
import { accessOf, getDeployedChatbot } from "./visitor-access";
import type { ChatbotRow } from "./chatbots.service";

/** A page that says the chatbot is not available, with no script: an undeployed chatbot answers nothing. */
function unavailable(): Response {
  return htmlPage({
    title: "Chatbot unavailable",
    status: 404,
    frameAncestors: "any",
    styles: ["/chat.css"],
    body: '<main id="loom-chat"><p class="alert" role="alert">This chatbot is not available right now.</p></main>',
  });
}

/** The sites that may frame the chat page: the chatbot's allowed origins, or any site when it names none. */
function framers(row: ChatbotRow): "any" | string[] {
  const allowed = accessOf(row).allowed_origins ?? [];
  return allowed.length === 0 ? "any" : allowed;
}

/**
 * GET /chat/{chatbot_id}: the chat as a full page (the share link), and inside the widget's iframe
 * with ?embed=1. The shell is static; /chat.js (Workers static assets) talks to the visitor routes.
 */
export function registerChatPageRoutes(app: OpenAPIHono<AppBindings>): void {
  app.get("/chat/:chatbot_id", async (c) => {
    const id = c.req.param("chatbot_id");
    if (!ID_PATTERN.test(id)) return unavailable();
    let row: ChatbotRow;
    try {
      row = await getDeployedChatbot(c.env, id);
    } catch (error) {
      if (error instanceof AppError && error.code === "not_found") return unavailable();
      throw error;
    }
    const embed = c.req.query("embed") === "1" ? "1" : "0";
    return htmlPage({
      title: "Chat",
      frameAncestors: framers(row),
      styles: ["/chat.css"],
      scripts: ["/chat.js"],
      body: `<main id="loom-chat" data-chatbot-id="${escapeHtml(row.id)}" data-embed="${embed}"></main>`,
    });
  });
}
