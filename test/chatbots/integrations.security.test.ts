import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { bearer, form, seedOrg } from "../helpers";
import { body, chatbotApp, createChatbot, type ChatbotApp } from "./harness";
import { WORKSPACE_BOT_TOKEN, WORKSPACE_SIGNING, signWorkspace } from "./webhook-signing";

/**
 * A chatbot's integrations hold secrets (the workspace bot token, the signing secrets) and the URL
 * the bot token is sent to. Editors may change a chatbot, but only an owner or admin of the
 * organization may change where its secrets go or what they are, and the workspace API URL may
 * only name the workspace's own hosts.
 */

async function signedEvent(app: ChatbotApp, id: string, eventId: string): Promise<Response> {
  const raw = JSON.stringify({
    type: "event_callback",
    team_id: "T1",
    event_id: eventId,
    event: { type: "app_mention", text: "hello", user: "U1", channel: "C1", ts: "1700000000.0001" },
  });
  const ts = Math.floor(Date.now() / 1000);
  return app.request(`/chatbots/webhooks/chatworkspace/${id}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-chatworkspace-request-timestamp": String(ts),
      "x-chatworkspace-signature": await signWorkspace(WORKSPACE_SIGNING, ts, raw),
    },
    body: raw,
  });
}

describe("chatbots: integration URLs and secrets", () => {
  it("an editor (member) cannot change the workspace URL or any integration secret; an admin can", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const editor = await org.addMember("member");
    const admin = await org.addMember("admin");
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/rbac",
      form({ chatbot_id: id, editors: editor.userId }, bearer(org.owner.token)),
    );
    await app.request(
      "/chatbots/update/chatworkspace",
      form(
        {
          chatbot_id: id,
          team_id: "T1",
          signing_secret: WORKSPACE_SIGNING,
          bot_token: WORKSPACE_BOT_TOKEN,
          enabled: "true",
        },
        bearer(org.owner.token),
      ),
    );
    const before = await body(await app.request(`/chatbots/${id}`, { headers: bearer(org.owner.token) }));

    const attempts: [string, Record<string, string>, string][] = [
      ["/chatbots/update/chatworkspace", { api_base_url: "https://api.slack.com/api" }, "api_base_url"],
      ["/chatbots/update/chatworkspace", { signing_secret: "editor-chosen-signing" }, "signing_secret"],
      ["/chatbots/update/chatworkspace", { bot_token: "xoxb-editor-chosen" }, "bot_token"],
      ["/chatbots/update/chatworkspace", { team_id: "T2", bot_token: "xoxb-editor-chosen" }, "bot_token"],
      ["/chatbots/update/telephony", { auth_token: "editor-chosen-token" }, "auth_token"],
    ];
    for (const [path, fields, named] of attempts) {
      const res = await app.request(path, form({ chatbot_id: id, ...fields }, bearer(editor.token)));
      expect(res.status, `${path} ${named}`).toBe(403);
      expect(await body(res)).toEqual({ detail: `only an owner or admin of the organization can change ${named}` });
    }
    // Nothing changed, not even the team id sent with a refused secret.
    expect(await body(await app.request(`/chatbots/${id}`, { headers: bearer(org.owner.token) }))).toEqual(before);
    // Editors still edit everything else, and an admin may change the integration.
    expect(
      (
        await app.request(
          "/chatbots/update/chatworkspace",
          form({ chatbot_id: id, team_id: "T3" }, bearer(editor.token)),
        )
      ).status,
    ).toBe(200);
    const byAdmin = await app.request(
      "/chatbots/update/chatworkspace",
      form(
        { chatbot_id: id, bot_token: "xoxb-admin-rotated-4242", api_base_url: "https://slack.com/api" },
        bearer(admin.token),
      ),
    );
    expect(byAdmin.status).toBe(200);
    expect(await body(byAdmin)).toMatchObject({
      object: { chatworkspace: { teamId: "T3", botTokenLastFour: "4242" } },
    });
  });

  it("a member who owns a chatbot still needs an owner or admin to set its integration secrets", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const member = await org.addMember("member");
    const id = await createChatbot(app, member.apiKey);
    const res = await app.request(
      "/chatbots/update/chatworkspace",
      form({ chatbot_id: id, signing_secret: WORKSPACE_SIGNING, bot_token: WORKSPACE_BOT_TOKEN }, bearer(member.token)),
    );
    expect(res.status).toBe(403);
    expect(await body(res)).toEqual({
      detail: "only an owner or admin of the organization can change signing_secret, bot_token",
    });
    expect(
      (
        await app.request(
          "/chatbots/update/chatworkspace",
          form(
            { chatbot_id: id, signing_secret: WORKSPACE_SIGNING, bot_token: WORKSPACE_BOT_TOKEN },
            bearer(org.owner.token),
          ),
        )
      ).status,
    ).toBe(200);
  });

  it("the workspace API URL must be on the workspace's own hosts, in every spelling (422 naming api_base_url)", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const refused = [
      "https://attacker.example/api",
      "https://slack.com.attacker.example/api",
      "https://evilslack.com/api",
      "http://slack.com/api",
      "https://slack.com:8443/api",
      "https://user:pw@slack.com/api",
      "https://localhost/api",
      "https://127.0.0.1/api",
      "https://2130706433/api",
      "https://0x7f.1/api",
      "https://[::1]/api",
      "https://[::ffff:127.0.0.1]/api",
      "https://169.254.169.254/latest/meta-data",
      "https://10.0.0.1/api",
      "https://192.168.0.1/api",
      "not a url",
    ];
    for (const url of refused) {
      const res = await app.request(
        "/chatbots/update/chatworkspace",
        form(
          { chatbot_id: id, api_base_url: url, signing_secret: WORKSPACE_SIGNING, bot_token: WORKSPACE_BOT_TOKEN },
          bearer(org.owner.token),
        ),
      );
      expect(res.status, url).toBe(422);
      const issue = ((await body(res)).detail as { loc: string[]; msg: string }[])[0];
      expect(issue.loc, url).toEqual(["body", "api_base_url"]);
      expect(issue.msg, url).toMatch(
        /^must be an https URL on slack\.com, \*\.slack\.com, slack-gov\.com, \*\.slack-gov\.com: /,
      );
    }
    const record = await body(await app.request(`/chatbots/${id}`, { headers: bearer(org.owner.token) }));
    expect(record).toMatchObject({ object: { chatworkspace: { hasBotToken: false, hasSigningSecret: false } } });
  });

  it("a stored workspace URL off the allow-list never receives the bot token", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/chatworkspace",
      form(
        {
          chatbot_id: id,
          team_id: "T1",
          signing_secret: WORKSPACE_SIGNING,
          bot_token: WORKSPACE_BOT_TOKEN,
          enabled: "true",
        },
        bearer(org.owner.token),
      ),
    );
    // A row saved before the allow-list existed.
    for (const stored of ["https://attacker.example/api", "https://169.254.169.254/latest"]) {
      await env.DB.prepare("UPDATE chatbots SET chatworkspace = ? WHERE id = ?")
        .bind(JSON.stringify({ team_id: "T1", enabled: true, api_base_url: stored }), id)
        .run();
      expect(await body(await signedEvent(app, id, `Ev-${stored}`))).toEqual({ ok: true });
      await app.settle();
    }
    expect(app.recorded.fetches).toEqual([]);
    // The workspace's own API still gets the reply.
    await env.DB.prepare("UPDATE chatbots SET chatworkspace = ? WHERE id = ?")
      .bind(JSON.stringify({ team_id: "T1", enabled: true }), id)
      .run();
    await signedEvent(app, id, "Ev-default");
    await app.settle();
    expect(app.recorded.fetches.map((f) => [f.url, new Headers(f.init?.headers).get("authorization")])).toEqual([
      ["https://slack.com/api/chat.postMessage", `Bearer ${WORKSPACE_BOT_TOKEN}`],
    ]);
  });
});
