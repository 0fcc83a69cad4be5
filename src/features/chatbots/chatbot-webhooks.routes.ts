import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppBindings } from "../../env";
import { defineRoute } from "../../lib/route";
import { cappedBody } from "../../middleware/body-cap";
import { WebhookReply } from "./chatbots.responses";
import { ChatbotIdParams } from "./chatbots.schemas";
import { handleTelephonyWebhook, handleWorkspaceWebhook } from "./chatbot-webhooks.service";
import { keepAliveFor } from "./keep-alive";

/**
 * Webhook bodies are read raw (their signatures cover the exact bytes sent), and only up to this
 * size: the route's body cap stops reading at it, before any signature is checked.
 */
export const MAX_WEBHOOK_BYTES = 256 * 1024;

export function registerChatbotWebhookRoutes(app: OpenAPIHono<AppBindings>): void {
  const hook = { group: "B", auth: "none", tags: ["Chatbot integrations"] } as const;

  defineRoute(
    app,
    {
      ...hook,
      method: "post",
      path: "/chatbots/webhooks/telephony/:chatbot_id",
      produces: "text/xml",
      summary: "Inbound telephony webhook (SMS and calls); answers in the provider's XML",
      description:
        "Signed by the provider: `X-Telephony-Signature` is base64 HMAC-SHA1 (keyed with the account's auth token) of the full URL followed by the sorted form parameters, names then values. Unsigned, wrongly signed and replayed requests are refused.",
      params: ChatbotIdParams,
      maxBodyBytes: MAX_WEBHOOK_BYTES,
      responses: {
        401: "Unsigned or wrongly signed",
        404: "No chatbot with telephony enabled",
        409: "Replayed request",
        413: "Body over 256 KiB",
      },
    },
    async (c, { params }) => {
      const signature = c.req.header("x-telephony-signature") ?? c.req.header("x-twilio-signature");
      const reply = await handleTelephonyWebhook(
        c.env,
        c.get("deps").chatbotServices(c.env),
        params.chatbot_id,
        c.req.url,
        new TextDecoder().decode(cappedBody(c)),
        signature,
      );
      return c.body(reply, 200, { "content-type": "text/xml; charset=utf-8" });
    },
  );

  defineRoute(
    app,
    {
      ...hook,
      method: "post",
      path: "/chatbots/webhooks/chatworkspace/:chatbot_id",
      response: WebhookReply,
      summary:
        "Inbound chat workspace events; answers the URL verification challenge and replies through the workspace's web API",
      description:
        "Signed by the workspace: `X-Chatworkspace-Signature: v0=<hex HMAC-SHA256 of v0:<timestamp>:<body>>` with `X-Chatworkspace-Request-Timestamp`; requests more than 5 minutes off are stale. Unsigned, stale, wrongly signed and replayed requests are refused.",
      params: ChatbotIdParams,
      maxBodyBytes: MAX_WEBHOOK_BYTES,
      responses: {
        401: "Unsigned, stale or wrongly signed",
        404: "No chatbot with the workspace integration enabled",
        409: "Replayed event",
        413: "Body over 256 KiB",
      },
    },
    async (c, { params }) => {
      const timestamp = c.req.header("x-chatworkspace-request-timestamp") ?? c.req.header("x-slack-request-timestamp");
      const signature = c.req.header("x-chatworkspace-signature") ?? c.req.header("x-slack-signature");
      const env = c.env;
      return c.json(
        await handleWorkspaceWebhook(
          env,
          c.get("deps").chatbotServices(env),
          params.chatbot_id,
          new TextDecoder().decode(cappedBody(c)),
          timestamp,
          signature,
          keepAliveFor(c),
        ),
      );
    },
  );
}
