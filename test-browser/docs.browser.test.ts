import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync } from "node:fs";
import type { Browser, Locator, Page } from "playwright-core";
import { launchChromium, startLoom, type Loom } from "./harness";

/**
 * /docs as a person uses it: Swagger UI from Loom's own origin, "Authorize" with an API key and
 * "Try it out" / "Execute" on a Group A route, then with an access token on a Group B route. The
 * page runs under its Content-Security-Policy: any violation (a blocked icon, style or request)
 * fails the test, whether the browser reports it as an event or on the console.
 */

const ARTIFACTS = "test-artifacts";

let loom: Loom;
let browser: Browser;
let token = "";
let apiKey = "";

async function post(path: string, body: unknown, auth = ""): Promise<Record<string, unknown>> {
  const res = await fetch(`${loom.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  loom = await startLoom({});
  const name = `docs${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  token = String(
    (
      await post("/auth/signup", {
        email: `${name}@example.com`,
        password: "correct horse battery",
        organization: name,
      })
    ).access_token,
  );
  apiKey = String((await post("/auth/api-keys", { name: "docs-browser" }, token)).key);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await loom?.stop();
});

/** Opens /docs, recording every CSP violation the page sees. */
async function openDocs(): Promise<{ page: Page; violations: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const violations: string[] = [];
  await page.exposeFunction("__reportViolation", (text: string) => violations.push(text));
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (event) => {
      (window as unknown as { __reportViolation: (text: string) => void }).__reportViolation(
        `${event.violatedDirective} ${event.blockedURI}`,
      );
    });
  });
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => violations.push(`pageerror: ${error.message}`));
  await page.goto(`${loom.url}/docs`);
  await expect.poll(() => page.locator(".swagger-ui .info .title").first().textContent()).toContain("Loom API");
  return { page, violations };
}

/** "Authorize": logs out of what was given before, then gives the bearer credential. */
async function authorize(page: Page, credential: string): Promise<void> {
  await page.locator(".scheme-container button.authorize").click();
  const dialog = page.locator(".dialog-ux .modal-ux");
  const logout = dialog.locator(".auth-btn-wrapper button", { hasText: "Logout" });
  if (await logout.count()) await logout.click();
  await dialog.locator("input").first().fill(credential);
  await dialog.locator(".auth-btn-wrapper button.authorize").click();
  await dialog.locator("button.btn-done").click();
}

/** Opens one operation (method and path) and answers its block. */
async function operation(page: Page, method: string, path: string): Promise<Locator> {
  const block = page
    .locator(`.opblock-${method}`)
    .filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) })
    .first();
  await block.locator(".opblock-summary").first().click();
  return block;
}

/** Executes and answers the live response's status and body text. */
async function execute(block: Locator): Promise<{ status: string; body: string }> {
  await block.locator("button.execute").click();
  const live = block.locator(".live-responses-table .response").first();
  await expect.poll(() => live.locator(".response-col_status").textContent(), { timeout: 20_000 }).toMatch(/\d{3}/);
  return {
    status: (await live.locator(".response-col_status").textContent())?.trim() ?? "",
    body: (await live.locator(".response-col_description pre").first().textContent()) ?? "",
  };
}

describe("/docs in a browser", () => {
  it("Authorize with an API key, then Try it out / Execute creates a knowledge base (Group A); with an access token lists the API keys (Group B)", async () => {
    const { page, violations } = await openDocs();
    await authorize(page, apiKey);

    const create = await operation(page, "post", "/v1/knowledge-base");
    const editor = create.locator("textarea.body-param__text");
    // The example body is filled from the schema behind the $ref: the create body's fields, not "".
    await expect.poll(() => editor.inputValue()).toContain('"name"');
    const example = JSON.parse(await editor.inputValue()) as Record<string, unknown>;
    expect(Object.keys(example)).toEqual(expect.arrayContaining(["name", "description"]));
    await editor.fill(JSON.stringify({ name: "made from /docs" }));
    const created = await execute(create);
    expect(created.status).toBe("200");
    const answer = JSON.parse(created.body) as { status: string; id: string };
    expect(answer).toMatchObject({ status: "success", id: expect.stringMatching(/^[0-9a-f]{24}$/) });
    // The body shown is the real answer: the knowledge base exists under that id.
    const fetched = await fetch(`${loom.url}/v1/knowledge-base?id=${answer.id}`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(((await fetched.json()) as { object: { name: string } }).object.name).toBe("made from /docs");

    await authorize(page, token);
    const keys = await operation(page, "get", "/auth/api-keys");
    const listed = await execute(keys);
    expect(listed.status).toBe("200");
    expect((JSON.parse(listed.body) as { api_keys: { name: string }[] }).api_keys.map((k) => k.name)).toEqual([
      "docs-browser",
    ]);

    // The screenshot shows the Group B answer's response panel.
    await keys.locator(".live-responses-table").scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${ARTIFACTS}/docs.png`, fullPage: false });
    expect(violations).toEqual([]);
  });
});
