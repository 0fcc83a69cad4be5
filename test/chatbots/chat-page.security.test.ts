import { describe, expect, it } from "vitest";
import { bearer, call, json, seedOrg } from "../helpers";

async function deployedBot(access?: Record<string, unknown>, deployment: Record<string, unknown> = {}) {
  const org = await seedOrg();
  const created = await call(
    "/v1/chatbot",
    json(
      { name: `bot-${crypto.randomUUID()}`, description: "d", system_prompt: "Be brief." },
      bearer(org.owner.apiKey),
    ),
  );
  const createdBody = (await created.json()) as { id: string };
  expect(created.status, JSON.stringify(createdBody)).toBe(200);
  const id = String(createdBody.id);
  const deployed = await call("/chatbots/deploy", json({ chatbot_id: id, ...deployment }, bearer(org.owner.token)));
  expect(deployed.status, await deployed.clone().text()).toBe(200);
  if (access)
    expect(
      (await call("/chatbots/update/access", json({ chatbot_id: id, ...access }, bearer(org.owner.token)))).status,
    ).toBe(200);
  return { org, id };
}

const directive = (csp: string | null, name: string) =>
  (csp ?? "")
    .split(";")
    .map((d) => d.trim())
    .find((d) => d.startsWith(`${name} `));

describe("chat page: content security policy and framing", () => {
  it("serves /chat/{id} with a strict CSP whose frame-ancestors are the chatbot's allowed origins", async () => {
    const { id } = await deployedBot(
      { allowed_origins: ["https://shop.example"] },
      { display_name: `</script><script>alert(1)</script>` },
    );
    const res = await call(`/chat/${id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    const csp = res.headers.get("content-security-policy");
    expect(directive(csp, "frame-ancestors")).toBe("frame-ancestors 'self' https://shop.example");
    expect(directive(csp, "script-src")).toBe("script-src 'self'");
    expect(directive(csp, "default-src")).toBe("default-src 'none'");
    expect(directive(csp, "connect-src")).toBe("connect-src 'self'");
    expect(directive(csp, "img-src")).toBe("img-src 'self'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await res.text();
    // The shell names no bot text at all (the page's script shows it as text); no inline script.
    expect(html).not.toContain("alert(1)");
    expect(html.match(/<script[^>]*>/g)).toEqual(['<script src="/chat.js" defer>']);
  });

  it("an undeployed or unknown chatbot's page says so with no script, and a malformed id is not echoed", async () => {
    const { org, id } = await deployedBot();
    expect(
      (await call(`/chatbots/undeploy/${id}`, { method: "DELETE", headers: bearer(org.owner.token) })).status,
    ).toBe(200);
    for (const path of [`/chat/${id}`, "/chat/0123456789abcdef01234567", "/chat/%3Cscript%3Ealert(1)%3C%2Fscript%3E"]) {
      const res = await call(path);
      expect(res.status).toBe(404);
      const html = await res.text();
      expect(html).toContain("This chatbot is not available right now.");
      expect(html).not.toContain("<script");
      expect(html).not.toContain("alert(1)");
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    }
  });
});

describe("visitor routes: CORS from the allowed origins", () => {
  it("answers CORS only for an allowed origin, and lets Loom's own chat page through", async () => {
    const { id } = await deployedBot({ allowed_origins: ["https://shop.example"] });
    const preflight = (origin: string) =>
      call(`/chatbots/deployed/${id}/run`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
      });
    expect((await preflight("https://shop.example")).headers.get("access-control-allow-origin")).toBe(
      "https://shop.example",
    );
    expect((await preflight("https://evil.example")).headers.get("access-control-allow-origin")).toBeNull();
    const profile = await call(`/chatbots/deployed/${id}`, { headers: { origin: "https://evil.example" } });
    expect(profile.headers.get("access-control-allow-origin")).toBeNull();
    // The run from a refused site is still a 403, as before.
    expect(
      (await call(`/chatbots/deployed/${id}/run`, json({ text: "hi" }, { origin: "https://evil.example" }))).status,
    ).toBe(403);
    // The chat page calls from Loom's own origin (same-origin GETs carry Sec-Fetch-Site, not Origin).
    expect((await call(`/chatbots/deployed/${id}/session`, json({}, { origin: "http://loom.test" }))).status).toBe(200);
  });

  it("answers CORS for any origin when the chatbot names none, and for none when it is undeployed", async () => {
    const { org, id } = await deployedBot();
    const get = () => call(`/chatbots/deployed/${id}`, { headers: { origin: "https://anyone.example" } });
    expect((await get()).headers.get("access-control-allow-origin")).toBe("https://anyone.example");
    await call(`/chatbots/undeploy/${id}`, { method: "DELETE", headers: bearer(org.owner.token) });
    expect((await get()).headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("public agent page", () => {
  it("answers escaped HTML with a strict CSP to a browser, the JSON otherwise", async () => {
    const org = await seedOrg();
    const added = await call(
      "/agents/add",
      json(
        { name: `<script>alert(1)</script>Helper`, description: `<img src=x onerror=alert(2)>` },
        bearer(org.owner.token),
      ),
    );
    const agentId = String(((await added.json()) as { agent: { _id: string } }).agent._id);
    expect((await call("/agents/publish", json({ agent_id: agentId }, bearer(org.owner.token)))).status).toBe(200);
    const page = await call(`/agents/id/${agentId}`, {
      headers: { accept: "text/html,application/xhtml+xml,*/*;q=0.8" },
    });
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(directive(page.headers.get("content-security-policy"), "frame-ancestors")).toBe("frame-ancestors 'none'");
    const html = await page.text();
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;Helper");
    expect(html).toContain("&lt;img src=x onerror=alert(2)&gt;");
    expect(html).not.toMatch(/<script|<img/);
    const data = await call(`/agents/id/${agentId}`, { headers: { accept: "application/json" } });
    expect(data.headers.get("content-type")).toContain("application/json");
    expect(((await data.json()) as { name: string }).name).toBe("<script>alert(1)</script>Helper");
    expect((await call(`/agents/id/${agentId}`)).headers.get("content-type")).toContain("application/json");
  });
});
