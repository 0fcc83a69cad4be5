import { sign } from "hono/jwt";
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { signToken } from "../../src/lib/signed-token";
import { bearer, call, form, json, seedOrg } from "../helpers";
import { createKb } from "../knowledge-bases/kb-fixtures";
import { body, chatbotApp, createChatbot, deployPublic, run } from "./harness";
import { countingBody, MiB } from "../streamed-body";
import {
  TELEPHONY_TOKEN,
  WORKSPACE_BOT_TOKEN,
  WORKSPACE_SIGNING,
  signTelephony,
  signWorkspace,
} from "./webhook-signing";

describe("chatbots: authentication", () => {
  it("Group A answers the three 401 bodies; Group B answers 401 with detail", async () => {
    expect(await body(await call("/v1/chatbots"))).toEqual({ error: "Missing authorization header" });
    const badFormat = await call("/v1/chatbot/0123456789abcdef01234567/run", {
      method: "POST",
      headers: { authorization: "Token x" },
    });
    expect(badFormat.status).toBe(401);
    expect(await body(badFormat)).toEqual({ error: "Invalid authorization header format" });
    expect(await body(await call("/v1/chatbot?id=0123456789abcdef01234567", { headers: bearer("sk_nope") }))).toEqual({
      error: "Invalid API key",
    });
    const groupB = await call("/chatbots/conversations");
    expect(groupB.status).toBe(401);
    expect(await body(groupB)).toEqual({ detail: "Not authenticated" });
    for (const path of [
      "/chatbots/create",
      "/chatbots/deploy",
      "/chatbots/update/access",
      "/chatbots/update/telephony",
      "/chatbots/conversations/message/like",
    ]) {
      expect((await call(path, form({ chatbot_id: "0123456789abcdef01234567" }))).status).toBe(401);
    }
  });
});

describe("chatbots: tenancy", () => {
  it("another organization's chatbot, conversations and settings are 404, never 403", async () => {
    const app = chatbotApp();
    const owner = await seedOrg();
    const other = await seedOrg();
    const id = await createChatbot(app, owner.owner.apiKey);
    const answered = await run(app, owner.owner.apiKey, id, { text: "private question" });
    const conversationId = String(answered.body.conversation_id);
    const key = bearer(other.owner.apiKey);
    const token = bearer(other.owner.token);

    const responses = [
      await app.request(`/v1/chatbot?id=${id}`, { headers: key }),
      await app.request(`/v1/chatbot/${id}/run`, json({ text: "hi" }, key)),
      await app.request(`/v1/chatbot/${id}/run`, json({ text: "hi", conversation_id: conversationId }, key)),
      await app.request(`/v1/chatbot/${id}/terminate`, json({ conversation_id: conversationId }, key)),
      await app.request(`/v1/chatbot/${id}`, { method: "DELETE", headers: key }),
      await app.request(`/chatbots/${id}`, { headers: token }),
      await app.request(`/chatbots/conversations/${conversationId}`, { headers: token }),
      await app.request(
        "/chatbots/conversations/update/name",
        form({ conversation_id: conversationId, name: "x" }, token),
      ),
      await app.request("/chatbots/conversations/delete", form({ conversation_id: conversationId }, token, "DELETE")),
      await app.request(
        "/chatbots/conversations/message/like",
        form(
          {
            chatbot_id: id,
            conversation_id: conversationId,
            message_id: String(answered.body.message_id),
            like: "true",
          },
          token,
        ),
      ),
      await app.request("/chatbots/deploy", form({ chatbot_id: id }, token)),
      await app.request(`/chatbots/undeploy/${id}`, { method: "DELETE", headers: token }),
      await app.request("/chatbots/update/access", form({ chatbot_id: id, mode: "public" }, token)),
      await app.request("/chatbots/update/telephony", form({ chatbot_id: id, account_sid: "x" }, token)),
      await app.request("/chatbots/delete", form({ chatbot_id: id }, token, "DELETE")),
    ];
    expect(responses.map((r) => r.status)).toEqual(responses.map(() => 404));
    expect(await body(responses[0])).toEqual({ status: "failed", error: "chatbot not found" });
    expect(await body(responses[5])).toEqual({ detail: "chatbot not found" });
    const list = await body(await app.request(`/v1/chatbots?include_shared=true`, { headers: key }));
    expect(list.object_ids).toEqual([]);
    const theirs = await body(await app.request(`/chatbots/conversations`, { headers: token }));
    expect(theirs.conversations).toEqual([]);
  });

  it("a colleague cannot read or continue another member's conversation, nor change the chatbot", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const colleague = await org.addMember("member");
    const id = await createChatbot(app, org.owner.apiKey);
    const answered = await run(app, org.owner.apiKey, id, { text: "mine" });
    const conversationId = String(answered.body.conversation_id);
    expect(
      (await app.request(`/chatbots/conversations/${conversationId}`, { headers: bearer(colleague.token) })).status,
    ).toBe(404);
    expect((await run(app, colleague.apiKey, id, { text: "hijack", conversation_id: conversationId })).status).toBe(
      404,
    );
    const edit = await app.request(
      "/chatbots/update/deployment",
      form({ chatbot_id: id, greeting: "x" }, bearer(colleague.token)),
    );
    expect(edit.status).toBe(403);
    // The colleague may still run it in a conversation of their own.
    expect((await run(app, colleague.apiKey, id, { text: "my own" })).status).toBe(200);
  });

  it("RBAC runners restrict who may run the chatbot", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const allowed = await org.addMember("member");
    const other = await org.addMember("member");
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/rbac",
      form({ chatbot_id: id, runners: allowed.userId }, bearer(org.owner.token)),
    );
    expect((await run(app, allowed.apiKey, id, { text: "hi" })).status).toBe(200);
    const refused = await run(app, other.apiKey, id, { text: "hi" });
    expect(refused).toEqual({
      status: 403,
      body: { status: "failed", error: "this chatbot's access rules do not let you run it" },
    });
  });
});

describe("chatbots: the public surface", () => {
  it("the public profile leaks nothing private (canaries in prompt, model, secrets and password)", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    await call(
      "/admin/connections/create",
      form({ name: "canaryconn", kind: "openai", secret: "sk-CANARY-CONNECTION-KEY" }, bearer(org.owner.token)),
    );
    const kb = await createKb(org.owner.apiKey);
    const id = await createChatbot(app, org.owner.apiKey, {
      system_prompt: "CANARY-PROMPT secret instructions",
      model: "canaryconn/CANARY-MODEL",
      knowledge_base_ids: [kb],
    });
    const t = bearer(org.owner.token);
    await app.request(
      "/chatbots/update/telephony",
      form({ chatbot_id: id, account_sid: "CANARY-SID", auth_token: "CANARY-TELEPHONY-TOKEN", enabled: "true" }, t),
    );
    await app.request(
      "/chatbots/update/chatworkspace",
      form({ chatbot_id: id, signing_secret: "CANARY-SIGNING", bot_token: "CANARY-BOT-TOKEN", enabled: "true" }, t),
    );
    await app.request("/chatbots/update/rbac", form({ chatbot_id: id, editors: org.owner.userId }, t));
    await deployPublic(app, org.owner.token, id, { greeting: "Hello" });
    await app.request(
      "/chatbots/update/access",
      form({ chatbot_id: id, mode: "password", password: "CANARY-PASSWORD" }, t),
    );

    const res = await app.request(`/chatbots/deployed/${id}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    for (const canary of ["CANARY", "canaryconn", org.owner.userId, org.orgId, kb, "pbkdf2", "Be brief"])
      expect(text).not.toContain(canary);
    expect(JSON.parse(text)).toMatchObject({ chatbot: { _id: id, greeting: "Hello", access: { mode: "password" } } });

    // Secrets are write-only for the organization too.
    const own = await (await app.request(`/chatbots/${id}`, { headers: t })).text();
    for (const canary of ["CANARY-TELEPHONY-TOKEN", "CANARY-SIGNING", "CANARY-BOT-TOKEN", "CANARY-PASSWORD", "pbkdf2"])
      expect(own).not.toContain(canary);
  });

  it("an unknown or undeployed chatbot has no public surface", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    for (const target of [id, "0123456789abcdef01234567"]) {
      const profile = await app.request(`/chatbots/deployed/${target}`);
      expect(profile.status).toBe(404);
      expect(await body(profile)).toEqual({ detail: "chatbot not found" });
      expect((await app.request(`/chatbots/deployed/${target}/run`, json({ text: "hi" }))).status).toBe(404);
    }
  });

  it("visitor sessions cannot read or continue each other's conversations; forged sessions are refused", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    const otherId = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await deployPublic(app, org.owner.token, otherId);
    const alice = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "alice secret" })));
    const bob = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "bob question" })));
    const aliceSession = String(alice.visitor_session);
    const bobSession = String(bob.visitor_session);
    const asBob = { "x-visitor-session": bobSession };

    const bobList = await body(await app.request(`/chatbots/deployed/${id}/conversations`, { headers: asBob }));
    expect((bobList.conversations as { _id: string }[]).map((c) => c._id)).toEqual([bob.conversation_id]);
    expect(
      (await app.request(`/chatbots/deployed/${id}/conversations/${String(alice.conversation_id)}`, { headers: asBob }))
        .status,
    ).toBe(404);
    expect(
      (
        await app.request(
          `/chatbots/deployed/${id}/run`,
          json({ text: "peek", conversation_id: alice.conversation_id }, asBob),
        )
      ).status,
    ).toBe(404);
    const like = await app.request(
      "/chatbots/deployed/conversations/message/like",
      form(
        {
          chatbot_id: id,
          conversation_id: String(alice.conversation_id),
          message_id: String(alice.message_id),
          like: "true",
        },
        asBob,
      ),
    );
    expect(like.status).toBe(404);
    // Nor does the organization's own listing show visitors' conversations as the owner's.
    const ownerList = await body(await app.request(`/chatbots/conversations`, { headers: bearer(org.owner.token) }));
    expect(ownerList.conversations).toEqual([]);

    // A session is a signed JWT: its claims rewritten under the old signature, or re-signed with
    // another secret, or signed with none, are all refused.
    const [header, payload, sig] = aliceSession.split(".");
    const claims = JSON.parse(base64UrlText(payload)) as Record<string, unknown>;
    const tampered = `${header}.${textBase64Url(JSON.stringify({ ...claims, vid: "f".repeat(24) }))}.${sig}`;
    const unsigned = `${textBase64Url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${payload}.`;
    const otherSecret = await sign(claims, "not-the-server-secret-at-all", "HS256");
    for (const forged of [
      tampered,
      `${header}.${payload}.${"A".repeat(43)}`,
      unsigned,
      otherSecret,
      "vs1.garbage",
      // One signature character changed: a middle one, since the last base64url character of an
      // HS256 signature carries two padding bits that decode to the same signature.
      flipSignatureCharacter(bobSession),
    ]) {
      const res = await app.request(`/chatbots/deployed/${id}/conversations`, {
        headers: { "x-visitor-session": forged },
      });
      expect(res.status).toBe(401);
    }
    // A session for one chatbot does not open another.
    expect(
      (
        await app.request(`/chatbots/deployed/${otherId}/conversations`, {
          headers: { "x-visitor-session": aliceSession },
        })
      ).status,
    ).toBe(401);
  });

  it("changing the password ends earlier sessions; a wrong password gets no session", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request(
      "/chatbots/update/access",
      form({ chatbot_id: id, mode: "password", password: "first password" }, bearer(org.owner.token)),
    );
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }))).status).toBe(401);
    const wrong = await app.request(`/chatbots/deployed/${id}/session`, json({ password: "guess" }));
    expect(wrong.status).toBe(401);
    expect(await body(wrong)).toEqual({ detail: "wrong or missing password for this chatbot" });
    const session = String(
      (await body(await app.request(`/chatbots/deployed/${id}/session`, json({ password: "first password" }))))
        .visitor_session,
    );
    expect(
      (await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, { "x-visitor-session": session })))
        .status,
    ).toBe(200);
    await app.request(
      "/chatbots/update/access",
      form({ chatbot_id: id, password: "second password" }, bearer(org.owner.token)),
    );
    expect(
      (await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, { "x-visitor-session": session })))
        .status,
    ).toBe(401);
  });

  it("members-only chatbots refuse anonymous visitors and other organizations' members", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const stranger = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request("/chatbots/update/access", form({ chatbot_id: id, mode: "members" }, bearer(org.owner.token)));
    expect((await app.request(`/chatbots/deployed/${id}/session`, { method: "POST" })).status).toBe(401);
    expect(
      (await app.request(`/chatbots/deployed/${id}/session`, { method: "POST", headers: bearer(stranger.owner.token) }))
        .status,
    ).toBe(403);
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }))).status).toBe(401);
  });

  it("a members-mode session is re-checked on every request: dropped runners, suspended and deleted members lose it at once", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const [runner, colleague, leaver] = [
      await org.addMember("member"),
      await org.addMember("member"),
      await org.addMember("member"),
    ];
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    const owner = bearer(org.owner.token);
    await app.request("/chatbots/update/access", form({ chatbot_id: id, mode: "members" }, owner));
    await app.request(
      "/chatbots/update/rbac",
      form({ chatbot_id: id, runners: JSON.stringify([runner.userId, colleague.userId, leaver.userId]) }, owner),
    );
    const sessionOf = async (token: string) => ({
      "x-visitor-session": String(
        (await body(await app.request(`/chatbots/deployed/${id}/session`, { method: "POST", headers: bearer(token) })))
          .visitor_session,
      ),
    });
    const [asRunner, asColleague, asLeaver] = [
      await sessionOf(runner.token),
      await sessionOf(colleague.token),
      await sessionOf(leaver.token),
    ];
    for (const session of [asRunner, asColleague, asLeaver])
      expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, session))).status).toBe(200);

    // Dropped from the runners: the session issued before no longer runs or lists anything.
    await app.request(
      "/chatbots/update/rbac",
      form({ chatbot_id: id, runners: JSON.stringify([colleague.userId, leaver.userId]) }, owner),
    );
    const dropped = await app.request(`/chatbots/deployed/${id}/run`, json({ text: "still here?" }, asRunner));
    expect(dropped.status).toBe(403);
    expect(await body(dropped)).toEqual({ detail: "only permitted members of the chatbot's organization may use it" });
    expect((await app.request(`/chatbots/deployed/${id}/conversations`, { headers: asRunner })).status).toBe(403);
    expect(
      (await app.request(`/chatbots/deployed/${id}/session`, { method: "POST", headers: bearer(runner.token) })).status,
    ).toBe(403);
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, asColleague))).status).toBe(200);

    // Suspended, then deleted: refused at once as well.
    await call("/admin/users/change", form({ user_id: colleague.userId, suspended: "true" }, owner, "PUT"));
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, asColleague))).status).toBe(401);
    await call("/admin/users", form({ user_id: leaver.userId }, owner, "DELETE"));
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, asLeaver))).status).toBe(401);
  });

  it("allowed origins: other sites are refused; the rate limit answers 429", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request(
      "/chatbots/update/access",
      form(
        { chatbot_id: id, allowed_origins: "https://shop.example", rate_limit_per_minute: "2" },
        bearer(org.owner.token),
      ),
    );
    const evil = await app.request(
      `/chatbots/deployed/${id}/run`,
      json({ text: "hi" }, { origin: "https://evil.example" }),
    );
    expect(evil.status).toBe(403);
    expect(await body(evil)).toEqual({ detail: "this site may not use the chatbot" });
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" }))).status).toBe(403);

    const site = { origin: "https://shop.example" };
    const first = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "one" }, site)));
    const session = { ...site, "x-visitor-session": String(first.visitor_session) };
    expect((await app.request(`/chatbots/deployed/${id}/run`, json({ text: "two" }, session))).status).toBe(200);
    const third = await app.request(`/chatbots/deployed/${id}/run`, json({ text: "three" }, session));
    expect(third.status).toBe(429);
    expect(await body(third)).toEqual({ detail: "too many requests to this chatbot: try again in a minute" });
  });
});

describe("chatbots: client addresses", () => {
  /** Sessions per address per minute is 30; one minute boundary may fall inside the loop, so a 429 comes within 61. */
  async function sessionsUntilThrottled(
    send: (i: number) => Response | Promise<Response>,
  ): Promise<{ passed: number[]; throttled: Response }> {
    const passed: number[] = [];
    for (let i = 0; i < 61; i++) {
      const res = await send(i);
      if (res.status === 429) return { passed, throttled: res };
      passed.push(res.status);
    }
    throw new Error(`no 429 after ${passed.length} session requests`);
  }

  it("a password guesser rotating cf-connecting-ip is not trusted: it shares one bucket unless the deployment says so", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request(
      "/chatbots/update/access",
      form({ chatbot_id: id, mode: "password", password: "first password" }, bearer(org.owner.token)),
    );
    const guesses = await sessionsUntilThrottled((i) =>
      app.request(
        `/chatbots/deployed/${id}/session`,
        json({ password: `guess ${i}` }, { "cf-connecting-ip": `203.0.113.${i}` }),
      ),
    );
    expect(guesses.passed.length).toBeGreaterThanOrEqual(30);
    expect(guesses.passed.every((s) => s === 401)).toBe(true);
    expect(await body(guesses.throttled)).toEqual({
      detail: "too many requests to this chatbot: try again in a minute",
    });
    expect(Number(guesses.throttled.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    // Configured to trust the header (behind Cloudflare's edge): each address counts on its own.
    const trusted = chatbotApp({}, { TRUST_CLIENT_IP_HEADER: "cf-connecting-ip" });
    const open = await createChatbot(trusted, org.owner.apiKey);
    await deployPublic(trusted, org.owner.token, open);
    const busy = await sessionsUntilThrottled(() =>
      trusted.request(`/chatbots/deployed/${open}/session`, {
        method: "POST",
        headers: { "cf-connecting-ip": "198.51.100.7" },
      }),
    );
    expect(busy.passed.every((s) => s === 200)).toBe(true);
    expect(
      (
        await trusted.request(`/chatbots/deployed/${open}/session`, {
          method: "POST",
          headers: { "cf-connecting-ip": "198.51.100.8" },
        })
      ).status,
    ).toBe(200);
  });
});

describe("chatbots: hostile uploads", () => {
  it("invalid base64 in an upload is a 400 in the route's shape on the owner and visitor routes, and nothing is stored", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    const first = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hi" })));
    const visitor = String(first.visitor_session);
    const file = (raw: string) => ({
      type: "file",
      raw_bytes: raw,
      metadata: { name: "notes.txt", mime_type: "text/plain", size: 3 },
    });
    for (const raw of ["!!!not base64!!!", "YWJj\u0000", "a", "YW=Jj", "%%%", "\ud800"]) {
      const owner = await app.request(`/v1/chatbot/${id}/upload`, json({ file: file(raw) }, bearer(org.owner.apiKey)));
      expect([owner.status, await body(owner)], raw).toEqual([
        400,
        { status: "failed", error: "file: must be base64 text or a file part" },
      ]);
      const anonymous = await app.request(
        "/chatbots/upload",
        json({ chatbot_id: id, visitor_session: visitor, file: file(raw) }),
      );
      expect([anonymous.status, await body(anonymous)], raw).toEqual([
        400,
        { detail: "file: must be base64 text or a file part" },
      ]);
    }
    // No conversation was opened for the refused documents, for the owner or the visitor.
    expect(
      (await body(await app.request("/chatbots/conversations", { headers: bearer(org.owner.token) }))).conversations,
    ).toEqual([]);
    const mine = await body(
      await app.request(`/chatbots/deployed/${id}/conversations`, { headers: { "x-visitor-session": visitor } }),
    );
    expect((mine.conversations as unknown[]).length).toBe(1);
    // Valid base64, URL-safe and unpadded included, is still accepted.
    const ok = await app.request(`/v1/chatbot/${id}/upload`, json({ file: file("aGk_Pz8") }, bearer(org.owner.apiKey)));
    expect(ok.status).toBe(200);
  });
});

describe("chatbots: webhook signatures", () => {
  it("telephony: unsigned, wrongly signed and replayed requests are refused", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/telephony",
      form({ chatbot_id: id, auth_token: TELEPHONY_TOKEN, enabled: "true" }, bearer(org.owner.token)),
    );
    const path = `/chatbots/webhooks/telephony/${id}`;
    const params = { From: "+15551112222", Body: "hi", MessageSid: "SM9" };
    const unsigned = await app.request(path, form(params));
    expect(unsigned.status).toBe(401);
    expect(await body(unsigned)).toEqual({ detail: "missing request signature" });
    const wrongKey = await signTelephony("not-the-token", `http://loom.test${path}`, params);
    expect((await app.request(path, form(params, { "x-telephony-signature": wrongKey }))).status).toBe(401);
    const good = await signTelephony(TELEPHONY_TOKEN, `http://loom.test${path}`, params);
    const altered = await app.request(path, form({ ...params, Body: "changed" }, { "x-telephony-signature": good }));
    expect(altered.status).toBe(401);
    expect((await app.request(path, form(params, { "x-telephony-signature": good }))).status).toBe(200);
    const replay = await app.request(path, form(params, { "x-telephony-signature": good }));
    expect(replay.status).toBe(409);
    expect(app.recorded.answers).toHaveLength(1);
    // A chatbot without telephony enabled has no webhook.
    const plain = await createChatbot(app, org.owner.apiKey);
    expect(
      (await app.request(`/chatbots/webhooks/telephony/${plain}`, form(params, { "x-telephony-signature": good })))
        .status,
    ).toBe(404);
  });

  it("chat workspace: unsigned, stale, wrongly signed and replayed requests are refused", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/chatworkspace",
      form(
        { chatbot_id: id, signing_secret: WORKSPACE_SIGNING, bot_token: WORKSPACE_BOT_TOKEN, enabled: "true" },
        bearer(org.owner.token),
      ),
    );
    const path = `/chatbots/webhooks/chatworkspace/${id}`;
    const raw = JSON.stringify({
      type: "event_callback",
      event_id: "EvX",
      event: { type: "message", text: "hello", channel: "C9", ts: "1.0" },
    });
    const send = (headers: Record<string, string>, payload = raw) =>
      app.request(path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: payload });
    const now = Math.floor(Date.now() / 1000);

    const unsigned = await send({});
    expect(unsigned.status).toBe(401);
    expect(await body(unsigned)).toEqual({ detail: "missing request signature or timestamp" });
    const staleTs = now - 600;
    const stale = await send({
      "x-chatworkspace-request-timestamp": String(staleTs),
      "x-chatworkspace-signature": await signWorkspace(WORKSPACE_SIGNING, staleTs, raw),
    });
    expect(await body(stale)).toEqual({ detail: "stale request timestamp" });
    const wrong = await send({
      "x-chatworkspace-request-timestamp": String(now),
      "x-chatworkspace-signature": await signWorkspace("other-secret", now, raw),
    });
    expect(await body(wrong)).toEqual({ detail: "invalid request signature" });
    const headers = {
      "x-chatworkspace-request-timestamp": String(now),
      "x-chatworkspace-signature": await signWorkspace(WORKSPACE_SIGNING, now, raw),
    };
    expect((await send(headers, raw.replace("hello", "HELLO"))).status).toBe(401);
    // The challenge is answered only to signed requests too.
    const challenge = JSON.stringify({ type: "url_verification", challenge: "c" });
    expect(
      (
        await send(
          { "x-chatworkspace-request-timestamp": String(now), "x-chatworkspace-signature": "v0=00" },
          challenge,
        )
      ).status,
    ).toBe(401);

    expect((await send(headers)).status).toBe(200);
    const replay = await send(headers);
    expect(replay.status).toBe(409);
    await app.settle();
    expect(app.recorded.fetches).toHaveLength(1);
  });

  it("webhooks stop reading an unauthenticated body at 256 KiB: a 50 MiB stream answers 413 without being read whole", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await app.request(
      "/chatbots/update/telephony",
      form({ chatbot_id: id, auth_token: TELEPHONY_TOKEN, enabled: "true" }, bearer(org.owner.token)),
    );
    for (const path of [
      `/chatbots/webhooks/telephony/${id}`,
      `/chatbots/webhooks/chatworkspace/${id}`,
      "/chatbots/webhooks/telephony/0123456789abcdef01234567",
    ]) {
      const body = countingBody(50 * MiB);
      const res = await app.request(path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: body.stream,
      });
      expect(body.pulled(), path).toBeLessThan(1 * MiB);
      expect([res.status, await res.json()], path).toEqual([413, { detail: "request body exceeds 262144 bytes" }]);
      // A declared length smaller than what is streamed is not trusted: reading stops just past it.
      const lying = countingBody(50 * MiB);
      const refusedLie = await app.request(path, {
        method: "POST",
        headers: { "content-length": "100" },
        body: lying.stream,
      });
      expect(lying.pulled(), path).toBeLessThan(1 * MiB);
      expect([refusedLie.status, await refusedLie.json()], path).toEqual([
        400,
        { detail: "request body is longer than its Content-Length" },
      ]);
      // A declared length over the cap is refused before a byte is read.
      const declaredBig = countingBody(50 * MiB);
      const refused = await app.request(path, {
        method: "POST",
        headers: { "content-length": String(50 * MiB) },
        body: declaredBig.stream,
      });
      expect(refused.status, path).toBe(413);
      expect(declaredBig.pulled(), path).toBeLessThanOrEqual(64 * 1024);
    }
    // Just under the cap is read and then judged by its signature.
    const underCap = await app.request(
      `/chatbots/webhooks/telephony/${id}`,
      form({ From: "+15551112222", Body: "x".repeat(200 * 1024) }),
    );
    expect([underCap.status, await underCap.json()]).toEqual([401, { detail: "missing request signature" }]);
  });
});

describe("chatbots: visitor sessions and access tokens are one format with two audiences", () => {
  it("a members-mode visitor session is refused as an access token, and an access token as a visitor session", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    await app.request("/chatbots/update/access", form({ chatbot_id: id, mode: "members" }, bearer(org.owner.token)));
    const issued = await app.request(`/chatbots/deployed/${id}/session`, {
      method: "POST",
      headers: bearer(org.owner.token),
    });
    const session = String((await body(issued)).visitor_session);
    // Each works where it belongs: the session names the owner, signed with the same secret.
    const conversations = `/chatbots/deployed/${id}/conversations`;
    expect((await app.request(conversations, { headers: { "x-visitor-session": session } })).status).toBe(200);
    expect((await call("/auth/me", { headers: bearer(org.owner.token) })).status).toBe(200);
    // And nowhere else.
    for (const path of ["/auth/me", "/chatbots/conversations", "/admin/users"]) {
      const res = await call(path, { headers: bearer(session) });
      expect(res.status, path).toBe(401);
      expect(await body(res), path).toEqual({ detail: "Could not validate credentials" });
    }
    const asSession = await app.request(conversations, { headers: { "x-visitor-session": org.owner.token } });
    expect(asSession.status).toBe(401);
    expect(await body(asSession)).toEqual({
      detail: "a valid visitor session is required: POST /chatbots/deployed/{chatbot_id}/session",
    });
  });

  it("an expired visitor session is refused, though its signature and claims are right", async () => {
    const app = chatbotApp();
    const org = await seedOrg();
    const id = await createChatbot(app, org.owner.apiKey);
    await deployPublic(app, org.owner.token, id);
    const first = await body(await app.request(`/chatbots/deployed/${id}/run`, json({ text: "hello" })));
    const claims = JSON.parse(base64UrlText(String(first.visitor_session).split(".")[1])) as Record<string, string>;
    const day = 24 * 60 * 60;
    const longAgo = Math.floor(Date.now() / 1000) - 3 * day;
    const kept = { cb: claims.cb, vid: claims.vid, st: claims.st };
    const expired = await signToken(env, "visitor", kept, day, longAgo);
    const current = await signToken(env, "visitor", kept, day);
    const conversations = `/chatbots/deployed/${id}/conversations`;
    expect((await app.request(conversations, { headers: { "x-visitor-session": current } })).status).toBe(200);
    expect((await app.request(conversations, { headers: { "x-visitor-session": expired } })).status).toBe(401);
  });
});

function base64UrlText(part: string): string {
  return atob(part.replace(/-/g, "+").replace(/_/g, "/"));
}

function textBase64Url(text: string): string {
  return btoa(text).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}

function flipSignatureCharacter(token: string): string {
  const at = token.lastIndexOf(".") + 10;
  return token.slice(0, at) + (token[at] === "A" ? "B" : "A") + token.slice(at + 1);
}
