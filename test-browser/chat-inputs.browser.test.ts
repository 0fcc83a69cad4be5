// The chat's other inputs (voice messages, attached files), its icons, and the size and reach of
// what a host page loads, in Debian's chromium against Loom started as `npm start` starts it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import type { Server } from "node:http";
import type { Browser, Page } from "playwright-core";
import { Api, launchChromium, startFakeModel, startHostSite, startLoom, type HeardAudio, type Loom } from "./harness";

const ARTIFACTS = "test-artifacts";
const BUDGET = 30 * 1024;

let loom: Loom;
let host: { origin: string; server: Server };
let model: Server;
let heard: HeardAudio[];
let browser: Browser;
let api: Api;
let kb: string;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const fake = await startFakeModel(
    () => "unused",
    () => [],
    "Where is the warehouse?",
  );
  model = fake.server;
  heard = fake.heard;
  loom = await startLoom({ ALLOW_PRIVATE_MODEL_HOSTS: fake.host });
  host = await startHostSite(loom.url);
  // The host site counts as secure here, as an https shop would, so the framed chat may record.
  browser = await launchChromium(host.origin);
  api = new Api(loom.url);
  await api.signUp();
  // The organization's speech-to-text: the fake server's OpenAI-format /v1/audio/transcriptions.
  await api.connection("fake", fake.host);
  kb = await api.knowledgeBase(
    "warehouse",
    "# Warehouse\n\nOrders ship from our warehouse in Lyon within two business days.",
  );
});

afterAll(async () => {
  await browser?.close();
  await loom?.stop();
  host?.server.close();
  model?.close();
});

async function chatPage(bot: string): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${loom.url}/chat/${bot}`);
  await page.locator("#loom-chat[data-ready='1']").waitFor();
  return page;
}

async function lastAnswer(page: Page): Promise<string> {
  await expect.poll(() => page.getByRole("log").getAttribute("aria-busy")).toBe("false");
  return page.locator(".msg.bot .body").last().innerText();
}

describe("voice messages", () => {
  it("shows the microphone where the chatbot has speech to text, records, and sends the recording as audio", async () => {
    const bot = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "Talker" });
    const page = await chatPage(bot);
    const mic = page.getByRole("button", { name: "Record a voice message" });
    await mic.click();
    const stop = page.getByRole("button", { name: "Stop recording and send" });
    await expect.poll(() => stop.getAttribute("aria-pressed")).toBe("true");
    const before = heard.length;
    await stop.click();
    await page.locator(".msg.user").filter({ hasText: "Voice message" }).waitFor();
    expect(await lastAnswer(page)).toContain("Lyon");
    expect(heard.length).toBe(before + 1);
    expect(heard[before].contentType).toMatch(/^multipart\/form-data/);
    expect(heard[before].hasFilePart).toBe(true);
    expect(heard[before].bytes).toBeGreaterThan(200);
    expect(await page.getByRole("button", { name: "Record a voice message" }).getAttribute("aria-pressed")).toBe(
      "false",
    );
    await page.context().close();
  });

  it("records inside the widget on a host site: the frame is allowed the microphone", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Framed talker" },
      { allowed_origins: [host.origin] },
    );
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${host.origin}/?bot=${bot}`);
    await page.getByRole("button", { name: "Open chat with Framed talker" }).click();
    const chat = page.frameLocator("iframe[title='Chat with Framed talker']");
    const before = heard.length;
    await chat.getByRole("button", { name: "Record a voice message" }).click();
    await chat.getByRole("button", { name: "Stop recording and send" }).click();
    await chat.locator(".msg.user").filter({ hasText: "Voice message" }).waitFor();
    await expect.poll(() => chat.getByRole("log").getAttribute("aria-busy")).toBe("false");
    expect(await chat.locator(".msg.bot .body").last().innerText()).toContain("Lyon");
    expect(heard.length).toBe(before + 1);
    await context.close();
  });

  it("hides the microphone when speech_to_text is off, and where the organization has no speech-to-text", async () => {
    const off = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "Quiet", speech_to_text: false });
    const other = new Api(loom.url);
    await other.signUp();
    const noStt = await other.chatbot({ system_prompt: "Be brief." }, { display_name: "No speech" });
    for (const bot of [off, noStt]) {
      const page = await chatPage(bot);
      expect(await page.locator(".mic").isHidden()).toBe(true);
      expect(await page.getByRole("button", { name: "Record a voice message" }).count()).toBe(0);
      await page.context().close();
    }
  });
});

describe("attached files", () => {
  it("attaches a file where uploads are allowed, and the answer reads it", async () => {
    const bot = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "Reader" });
    const page = await chatPage(bot);
    await page.getByLabel("Message", { exact: true }).fill("Where is the warehouse?");
    await page.keyboard.press("Enter");
    expect(await lastAnswer(page)).toContain("Lyon");
    expect(await page.locator("label.attach").isVisible()).toBe(true);
    await page.locator("#loom-file").setInputFiles({
      name: "voucher.txt",
      mimeType: "text/plain",
      buffer: Buffer.from("The discount code for returning customers is ZEBRA42."),
    });
    await page.getByText("Attached voucher.txt.").waitFor({ state: "attached" });
    await page.getByLabel("Message", { exact: true }).fill("What is the discount code for returning customers?");
    await page.keyboard.press("Enter");
    expect(await lastAnswer(page)).toContain("ZEBRA42");
    await page.context().close();
  });

  it("hides the Attach button when allow_uploads is off", async () => {
    const bot = await api.chatbot({ knowledge_base_ids: [kb] }, { display_name: "No files", allow_uploads: false });
    const page = await chatPage(bot);
    expect(await page.locator("label.attach").isHidden()).toBe(true);
    expect(await page.locator("#loom-file").isDisabled()).toBe(true);
    await page.context().close();
  });
});

describe("what a host page loads", () => {
  it("inline SVG icons, no emoji; the widget and the chat page it frames ask Loom only, widget.js within 30 KB gzipped", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Icons" },
      { allowed_origins: [host.origin] },
    );
    const context = await browser.newContext();
    const requested: string[] = [];
    context.on("request", (request) => requested.push(request.url()));
    const page = await context.newPage();
    await page.goto(`${host.origin}/?bot=${bot}`);
    const launcher = page.getByRole("button", { name: /^(Open|Close) chat with Icons$/ });
    await launcher.click();
    const chat = page.frameLocator("iframe[title='Chat with Icons']");
    await chat.getByLabel("Message", { exact: true }).fill("Where is the warehouse?");
    await chat.getByRole("button", { name: "Send", exact: true }).click();
    await chat.getByRole("button", { name: "Helpful", exact: true }).waitFor();
    // Every button draws its icon as SVG with a real path, and no label leans on an emoji glyph.
    for (const button of [
      launcher,
      chat.getByRole("button", { name: "Helpful", exact: true }),
      chat.getByRole("button", { name: "Not helpful" }),
      chat.getByRole("button", { name: "Close chat" }),
    ]) {
      const box = await button.locator("svg path").boundingBox();
      expect(box && box.width > 4 && box.height > 4).toBe(true);
    }
    const labels = await chat.locator("button, label").allInnerTexts();
    for (const label of [...labels, await launcher.innerText()])
      expect(label).not.toMatch(/\p{Extended_Pictographic}/u);
    await page.screenshot({ path: `${ARTIFACTS}/widget-icons.png` });

    const origins = new Set(requested.map((url) => new URL(url).origin));
    expect([...origins].sort()).toEqual([host.origin, loom.url].sort());

    const gz = async (path: string): Promise<number> =>
      gzipSync(Buffer.from(await (await fetch(`${loom.url}${path}`)).arrayBuffer())).length;
    const widget = await gz("/widget.js");
    const pageTotal = (await gz(`/chat/${bot}?embed=1`)) + (await gz("/chat.js")) + (await gz("/chat.css"));
    console.log(
      `widget.js: ${(widget / 1024).toFixed(1)} KB gzipped; the chat page it frames (HTML + chat.js + chat.css): ${(pageTotal / 1024).toFixed(1)} KB gzipped`,
    );
    expect(widget).toBeLessThanOrEqual(BUDGET);
    await context.close();
  });

  it("the open widget at mobile width in dark mode: the panel fits the screen and the chat is dark", async () => {
    const bot = await api.chatbot(
      { knowledge_base_ids: [kb] },
      { display_name: "Pocket", greeting: "Hello from the pocket." },
      { allowed_origins: [host.origin] },
    );
    const context = await browser.newContext({
      viewport: { width: 375, height: 700 },
      isMobile: true,
      colorScheme: "dark",
    });
    const page = await context.newPage();
    await page.goto(`${host.origin}/?bot=${bot}`);
    await page.getByRole("button", { name: "Open chat with Pocket" }).click();
    const chat = page.frameLocator("iframe[title='Chat with Pocket']");
    await chat.getByText("Hello from the pocket.").waitFor();
    const box = await page.locator("iframe[title='Chat with Pocket']").boundingBox();
    expect(
      box && box.x >= 0 && box.x + box.width <= 375 && box.y >= 0 && box.y + box.height <= 700,
      JSON.stringify(box),
    ).toBe(true);
    const background = await chat.locator("body").evaluate((body) => getComputedStyle(body).backgroundColor);
    const [r, g, b] = (background.match(/\d+/g) ?? ["255", "255", "255"]).map(Number);
    expect(0.2126 * r + 0.7152 * g + 0.0722 * b).toBeLessThan(80);
    await page.screenshot({ path: `${ARTIFACTS}/widget-mobile-dark.png` });
    await context.close();
  });
});
