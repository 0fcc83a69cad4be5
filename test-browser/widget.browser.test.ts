import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync } from "node:fs";
import type { Server } from "node:http";
import type { Browser, BrowserContext, Frame, FrameLocator, Page } from "playwright-core";
import { Api, EVIL_NAME, launchChromium, startFakeModel, startHostSite, startLoom, type Loom } from "./harness";

const ARTIFACTS = "test-artifacts";
/** Each line tries to run script or send a request to evil.test if it were ever treated as HTML or followed. */
const XSS = [
  `<img src="http://${EVIL_NAME}/img.png" onerror="window.__xss=1;fetch('http://${EVIL_NAME}/onerror')">`,
  `<script>window.__xss=2;fetch('http://${EVIL_NAME}/script')</script>`,
  `<svg onload="window.__xss=3"></svg>`,
  `<iframe src="javascript:parent.__xss=4"></iframe>`,
  `[click me](javascript:window.__xss=5)`,
  `[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`,
  `![pixel](http://${EVIL_NAME}/pixel.png)`,
  `<a href="http://${EVIL_NAME}/auto" id="auto">auto</a><meta http-equiv="refresh" content="0;url=http://${EVIL_NAME}/refresh">`,
  `<style>@import url(http://${EVIL_NAME}/css);</style><form action="http://${EVIL_NAME}/form"><button>go</button></form>`,
].join("\n\n");

let loom: Loom;
let host: { origin: string; port: number; server: Server };
let model: Server;
let modelHost: string;
let browser: Browser;
let api: Api;
let kb: string;
const leaked: string[] = [];
/** Origins of every request any page or frame made: only the host site and Loom may appear. */
const origins = new Set<string>();

async function newPage(
  options: Parameters<Browser["newContext"]>[0] = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext(options);
  // Every request any frame makes, checked by the browser: none may go to the XSS target.
  context.on("request", (request) => {
    if (new URL(request.url()).hostname === EVIL_NAME) leaked.push(request.url());
    origins.add(new URL(request.url()).origin);
  });
  const page = await context.newPage();
  context.on("console", (message) => {
    if (message.type() === "warning" || message.type() === "error")
      console.log(`[browser ${message.type()}] ${message.text()}`);
  });
  page.on("dialog", (dialog) => {
    leaked.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { context, page };
}

async function openWidget(page: Page, botId: string): Promise<FrameLocator> {
  await page.goto(`${host.origin}/?bot=${botId}`);
  await page.getByRole("button", { name: /^Open chat with/ }).click();
  return page.frameLocator("iframe[title^='Chat with']");
}

async function ask(chat: FrameLocator, text: string): Promise<void> {
  await chat.getByLabel("Message", { exact: true }).fill(text);
  await chat.getByRole("button", { name: "Send", exact: true }).click();
}

/** The last answer's text, or the alert shown instead, so a failure says what the visitor saw. */
async function lastAnswer(scope: Page | FrameLocator): Promise<string> {
  const alert = await scope.locator(".alert").first().textContent();
  const bodies = scope.locator(".msg.bot .body");
  const text = (await bodies.count()) > 0 ? await bodies.last().innerText() : "";
  return text || (alert ? `ALERT: ${alert}` : "");
}

const chatFrame = (page: Page): Frame => {
  const frame = page.frames().find((f) => f.url().includes("/chat/"));
  if (!frame) throw new Error("no chat frame");
  return frame;
};

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const fake = await startFakeModel(
    () => `Here is what I found.\n\n${XSS}`,
    () => [
      `<img src=x onerror="window.__xss=9">Tell me more?`,
      `[link](javascript:window.__xss=10)`,
      "What about returns?",
    ],
  );
  model = fake.server;
  modelHost = fake.host;
  loom = await startLoom({ ALLOW_PRIVATE_MODEL_HOSTS: fake.host });
  host = await startHostSite(loom.url);
  browser = await launchChromium();
  api = new Api(loom.url);
  await api.signUp();
  kb = await api.knowledgeBase(
    "shipping",
    "# Shipping\n\nOrders ship within two business days from our warehouse in Lyon. Express delivery takes one day.\n\n# Returns\n\nReturns are accepted for thirty days.",
  );
});

afterAll(async () => {
  await browser?.close();
  await loom?.stop();
  host?.server.close();
  model?.close();
});

describe("the widget on another site", () => {
  it("streams an answer with its sources, takes a like, keeps the history over a reload, starts anew", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb], follow_up_questions: 2 },
      {
        display_name: "Shop helper",
        greeting: "Hello! Ask me about **shipping**.",
        primary_color: "#0f766e",
        suggested_questions: ["How fast do orders ship?"],
        show_sources: true,
      },
      { allowed_origins: [host.origin] },
    );
    const { context, page } = await newPage();
    const chat = await openWidget(page, bot);
    await expect.poll(() => chat.getByRole("heading", { name: "Shop helper" }).count()).toBe(1);
    await chat.getByText("Hello! Ask me about").waitFor();
    await chat.getByRole("button", { name: "How fast do orders ship?" }).waitFor();

    // Record every text the answer bubble shows while the log is busy: the streamed pieces.
    await chatFrame(page).evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { __streamed: string[] }).__streamed = seen;
      const log = document.querySelector(".log") as HTMLElement;
      new MutationObserver(() => {
        const bubbles = log.querySelectorAll(".msg.bot .body");
        const last = bubbles[bubbles.length - 1];
        if (log.getAttribute("aria-busy") === "true" && last?.textContent) seen.push(last.textContent);
      }).observe(log, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await ask(chat, "How fast do orders ship?");
    const answer = chat.locator(".msg.bot .body").last();
    await expect.poll(() => answer.locator(".sources").count()).toBe(1);
    expect(await answer.innerText()).toContain("two business days");
    expect(await answer.locator(".source").first().innerText()).toContain("shipping");
    const streamed = await chatFrame(page).evaluate(() => (window as unknown as { __streamed: string[] }).__streamed);
    expect(streamed.length).toBeGreaterThan(0);
    expect(await chat.getByRole("log").getAttribute("aria-busy")).toBe("false");

    const like = answer.getByRole("button", { name: "Helpful", exact: true });
    await like.click();
    await expect.poll(() => like.getAttribute("aria-pressed")).toBe("true");
    await page.screenshot({ path: `${ARTIFACTS}/widget-open.png` });

    await page.reload();
    const again = await (async () => {
      await page.getByRole("button", { name: /^Open chat with/ }).click();
      return page.frameLocator("iframe[title^='Chat with']");
    })();
    await again.getByRole("heading", { name: "Shop helper" }).waitFor();
    await again.locator(".msg.user").filter({ hasText: "How fast do orders ship?" }).waitFor();
    const restored = again.locator(".msg.bot .body").last();
    expect(await restored.innerText()).toContain("two business days");
    expect(await restored.getByRole("button", { name: "Helpful", exact: true }).getAttribute("aria-pressed")).toBe(
      "true",
    );

    await again.getByRole("button", { name: "New conversation" }).click();
    expect(await again.locator(".msg.user").count()).toBe(0);
    await again.getByText("Hello! Ask me about").waitFor();
    await context.close();
  });

  it("works with the keyboard alone: open, type, send, close", async () => {
    const bot = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "Keys" });
    const { context, page } = await newPage();
    await page.goto(`${host.origin}/?bot=${bot}`);
    const launcher = page.getByRole("button", { name: "Open chat with Keys" });
    await launcher.waitFor();
    await page.keyboard.press("Tab");
    expect(await launcher.evaluate((el) => el === (el.getRootNode() as ShadowRoot).activeElement)).toBe(true);
    await page.keyboard.press("Enter");
    const chat = page.frameLocator("iframe[title='Chat with Keys']");
    const input = chat.getByLabel("Message", { exact: true });
    await expect.poll(() => input.evaluate((el) => el === document.activeElement && document.hasFocus())).toBe(true);
    await page.keyboard.type("Where is the warehouse?");
    await page.keyboard.press("Enter");
    await expect.poll(() => lastAnswer(chat)).toContain("Lyon");
    await page.keyboard.press("Escape");
    const closer = page.getByRole("button", { name: "Close chat with Keys" });
    await expect.poll(() => closer.count()).toBe(0);
    expect(await page.getByRole("button", { name: "Open chat with Keys" }).getAttribute("aria-expanded")).toBe("false");
    expect(await page.locator("iframe").isVisible()).toBe(false);
    await context.close();
  });
});

describe("hostile text stays inert", () => {
  it("in messages, the bot's name and welcome, document text as sources, and follow-up questions", async () => {
    const evilKb = await api.knowledgeBase("evil", `Returns policy. ${XSS}`);
    await api.connection("fake", modelHost);
    const bot = await api.chatbot(
      { knowledge_base_ids: [evilKb], model: "fake/fake", follow_up_questions: 3 },
      {
        display_name: `<img src=x onerror="window.__xss=7">Evil`,
        greeting: XSS,
        suggested_questions: [`<script>window.__xss=8</script>`],
        show_sources: true,
      },
    );
    const { context, page } = await newPage();
    const chat = await openWidget(page, bot);
    await chat.getByRole("heading", { name: /Evil/ }).waitFor();
    await ask(chat, `Returns? ${XSS}`);
    const answer = chat.locator(".msg.bot .body").last();
    const followUps = answer.getByRole("group", { name: "Follow-up questions" }).getByRole("button");
    await expect.poll(() => followUps.count()).toBe(3);
    expect(await answer.locator(".source").count()).toBeGreaterThan(0);
    await followUps.first().click();
    await expect.poll(() => chat.locator(".msg.user").count()).toBe(2);
    await expect.poll(() => chat.getByRole("log").getAttribute("aria-busy")).toBe("false");
    await page.screenshot({ path: `${ARTIFACTS}/widget-xss.png` });

    const frame = chatFrame(page);
    for (const target of [page.mainFrame(), frame])
      expect(await target.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    // What did get rendered: no element that runs or loads anything, no link but http(s).
    // Loom's own icons are inline SVG (web/icons.ts) with one path and no handler; any other SVG was injected.
    const dangerous = await frame.evaluate(() =>
      [...document.querySelectorAll(".log, header, .chips")]
        .flatMap((box) => [
          ...box.querySelectorAll(
            "img, script, iframe, svg, style, form, meta, object, embed, foreignObject, use, [onerror], [onload]",
          ),
        ])
        .filter(
          (el) =>
            !(
              el.tagName === "svg" &&
              el.getAttribute("aria-hidden") === "true" &&
              el.children.length === 1 &&
              el.children[0].tagName === "path" &&
              el.attributes.length === 10 &&
              el.children[0].attributes.length === 1
            ),
        )
        .map((el) => el.outerHTML),
    );
    expect(dangerous).toEqual([]);
    const hrefs = await frame.evaluate(() =>
      [...document.querySelectorAll("#loom-chat a[href]")].map((a) => (a as HTMLAnchorElement).href),
    );
    for (const href of hrefs) expect(href).toMatch(/^https?:/);
    // The hostile text is there, as text.
    expect(await chat.locator(".msg.user").first().innerText()).toContain("<script>");
    expect(leaked).toEqual([]);
    expect([...origins].filter((origin) => origin !== host.origin && origin !== loom.url)).toEqual([]);
    await context.close();
  });
});

describe("access", () => {
  it("refuses to be framed by a site the chatbot does not allow, and loads where allowed", async () => {
    const refused = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Picky" },
      { allowed_origins: ["https://shop.example"] },
    );
    const allowed = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Open" },
      { allowed_origins: [host.origin] },
    );
    const { context, page } = await newPage();
    for (const [bot, loads] of [
      [refused, false],
      [allowed, true],
    ] as const) {
      await page.goto(`${host.origin}/frame?bot=${bot}`);
      const frame = page.frames().find((f) => f !== page.mainFrame());
      if (!frame) throw new Error("no frame");
      await frame.waitForLoadState();
      const text = await frame
        .evaluate(() => document.getElementById("loom-chat")?.dataset.chatbotId ?? null)
        .catch(() => null);
      expect(text, `framing chatbot ${loads ? "allowed" : "refused"} here`).toBe(loads ? bot : null);
      // The widget shows no launcher for a chatbot that refuses this site.
      await page.goto(`${host.origin}/?bot=${bot}`);
      await page.waitForLoadState("networkidle");
      expect(await page.getByRole("button", { name: /^Open chat with/ }).count()).toBe(loads ? 1 : 0);
    }
    await context.close();
  });

  it("asks for the password of a password chatbot, refuses a wrong one, then chats", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Vault" },
      { mode: "password", password: "open sesame please" },
    );
    const { context, page } = await newPage();
    await page.goto(`${loom.url}/chat/${bot}`);
    const password = page.getByLabel("This chatbot needs a password");
    await password.waitFor();
    await password.fill("wrong password!");
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("alert").filter({ hasText: "That password is not right." }).waitFor();
    await password.fill("open sesame please");
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByLabel("Message", { exact: true }).fill("How long for returns?");
    await page.keyboard.press("Enter");
    await expect.poll(() => lastAnswer(page)).toContain("thirty days");
    await context.close();
  });

  it("an undeployed chatbot's page and widget say so and answer nothing", async () => {
    const bot = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "Gone" });
    await api.undeploy(bot);
    const { context, page } = await newPage();
    const res = await page.goto(`${loom.url}/chat/${bot}`);
    expect(res?.status()).toBe(404);
    await page.getByText("This chatbot is not available right now.").waitFor();
    expect(await page.getByLabel("Message", { exact: true }).count()).toBe(0);
    await page.goto(`${host.origin}/?bot=${bot}`);
    await page.waitForLoadState("networkidle");
    expect(await page.getByRole("button", { name: /^Open chat with/ }).count()).toBe(0);
    await context.close();
  });
});

describe("pages", () => {
  it("the chat page full size, dark, and at mobile width; the public agent page", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Share link", greeting: "Hi there.", show_sources: true },
    );
    for (const [name, options] of [
      ["chat-page", { viewport: { width: 1100, height: 800 } }],
      ["chat-page-dark", { colorScheme: "dark" as const }],
      ["chat-page-mobile", { viewport: { width: 375, height: 700 }, isMobile: true }],
    ] as const) {
      const { context, page } = await newPage(options);
      await page.goto(`${loom.url}/chat/${bot}`);
      await page.getByLabel("Message", { exact: true }).fill("Is there express delivery?");
      await page.keyboard.press("Enter");
      await expect.poll(() => lastAnswer(page)).toContain("one day");
      await page.screenshot({ path: `${ARTIFACTS}/${name}.png` });
      await context.close();
    }
    const agent = await api.publishedAgent(
      `<script>window.__xss=1</script>Helper`,
      "Answers **questions** about orders.",
    );
    const { context, page } = await newPage();
    const res = await page.goto(`${loom.url}/agents/id/${agent}`);
    expect(res?.headers()["content-type"]).toContain("text/html");
    expect(res?.headers()["content-security-policy"]).toContain("frame-ancestors 'none'");
    await page.getByRole("heading", { name: /Helper/ }).waitFor();
    expect(await page.getByRole("heading", { name: /Helper/ }).innerText()).toContain("<script>");
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    await page.screenshot({ path: `${ARTIFACTS}/agent-page.png` });
    const json = await fetch(`${loom.url}/agents/id/${agent}`, { headers: { accept: "application/json" } });
    expect(json.headers.get("content-type")).toContain("application/json");
    await context.close();
  });
});
