// The browser tests' world: Loom itself (`scripts/start.mjs`, the real Worker on workerd), a host
// site on another origin that embeds the widget, a fake OpenAI-compatible model server (real wire
// format: chat completions with SSE streaming), and Debian's chromium driven by playwright-core.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";

const root = fileURLToPath(new URL("..", import.meta.url));
/** The host page's name: a different site from Loom's 127.0.0.1 (resolved by chromium's host rules). */
export const HOST_NAME = "host.test";
/** Where the XSS corpus would send a request if any of it ran; nothing may ever reach it. */
export const EVIL_NAME = "evil.test";

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  const port = await listen(probe);
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

export interface Loom {
  url: string;
  stop(): Promise<void>;
}

/** Starts Loom the way `npm start` does and waits for its banner ("Loom is running on"). */
export async function startLoom(vars: Record<string, string>): Promise<Loom> {
  const port = await freePort();
  const args = [
    path.join(root, "scripts/start.mjs"),
    "--port",
    String(port),
    ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}=${v}`]),
  ];
  const child: ChildProcess = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  // A suite that times out before its afterAll still ends the server it started.
  process.once("exit", () => child.kill("SIGTERM"));
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const onData = (data: Buffer) => {
      output += data.toString();
      if (output.includes("Loom is running on")) resolve();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** The embedding site: `/?bot=<id>` embeds the widget; `/frame?bot=<id>` frames the chat page directly. */
export async function startHostSite(loomUrl: string): Promise<{ origin: string; port: number; server: Server }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const bot = (url.searchParams.get("bot") ?? "").replace(/[^0-9a-f]/g, "");
    const body =
      url.pathname === "/frame"
        ? `<!doctype html><title>framer</title><iframe id="direct" title="direct" src="${loomUrl}/chat/${bot}"></iframe>`
        : `<!doctype html><html lang="en"><meta name="viewport" content="width=device-width, initial-scale=1"><title>A host site</title><h1>Someone's shop</h1><p>Welcome to the shop.</p><script src="${loomUrl}/widget.js" data-chatbot-id="${bot}" async></script></html>`;
    // The host's own strict CSP, as docs/widget.md tells site owners to write it.
    res.writeHead(200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": `default-src 'none'; script-src ${loomUrl}; connect-src ${loomUrl}; frame-src ${loomUrl}; style-src 'self'`,
    });
    res.end(body);
  });
  const port = await listen(server);
  return { origin: `http://${HOST_NAME}:${port}`, port, server };
}

/** What the fake speech-to-text endpoint received: one entry per transcription request. */
export interface HeardAudio {
  contentType: string;
  bytes: number;
  hasFilePart: boolean;
}

/**
 * An OpenAI-compatible server whose every answer and follow-up list is the given text, and whose
 * `/v1/audio/transcriptions` (multipart, as OpenAI's) hears `transcript` in any audio it is sent.
 */
export async function startFakeModel(
  answer: () => string,
  followUps: () => string[],
  transcript = "Where is the warehouse?",
): Promise<{ host: string; server: Server; heard: HeardAudio[] }> {
  const heard: HeardAudio[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const rawBytes = Buffer.concat(chunks);
      if ((req.url ?? "").endsWith("/audio/transcriptions")) {
        heard.push({
          contentType: String(req.headers["content-type"] ?? ""),
          bytes: rawBytes.length,
          hasFilePart: /name="file"/.test(rawBytes.toString("latin1")),
        });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ text: transcript }));
        return;
      }
      const raw = rawBytes.toString();
      const body = JSON.parse(raw || "{}") as { stream?: boolean; messages?: { content: string }[] };
      const asksFollowUps = (body.messages?.[0]?.content ?? "").startsWith("Suggest short follow-up");
      const text = asksFollowUps ? followUps().join("\n") : answer();
      if (!body.stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: "c1",
            object: "chat.completion",
            model: "fake",
            choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const piece of text.match(/.{1,12}/gs) ?? [])
        res.write(
          `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", model: "fake", choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`,
        );
      res.write(
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", model: "fake", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
    });
  });
  const port = await listen(server);
  return { host: `127.0.0.1:${port}`, server, heard };
}

/** `secureHost`: an http origin chromium treats as https would be, so a page there may use the microphone as a real (https) host site's can. */
export async function launchChromium(secureHost?: string): Promise<Browser> {
  const executablePath = execFileSync("which", ["chromium"]).toString().trim();
  // Chromium's default storage rules (a framed chat keeps its conversation in a partitioned
  // cookie, web/storage.ts). The media flags give the microphone a fake device (a tone) and
  // grant it without a prompt, so the voice-message test records real audio.
  return chromium.launch({
    executablePath,
    args: [
      "--no-sandbox",
      "--use-fake-device-for-media-stream",
      "--use-fake-ui-for-media-stream",
      `--host-resolver-rules=MAP ${HOST_NAME} 127.0.0.1, MAP ${EVIL_NAME} 127.0.0.1`,
      ...(secureHost ? [`--unsafely-treat-insecure-origin-as-secure=${secureHost}`] : []),
    ],
  });
}

/** A signed-up organization owner talking to Loom over HTTP. */
export class Api {
  constructor(
    readonly base: string,
    private token = "",
    private key = "",
  ) {}

  private async request(
    pathname: string,
    init: { method?: string; body?: unknown; auth?: "token" | "key" },
  ): Promise<Record<string, unknown>> {
    const auth = init.auth === "key" ? this.key : this.token;
    const res = await fetch(`${this.base}${pathname}`, {
      method: init.method ?? "POST",
      headers: { "content-type": "application/json", ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new Error(`${pathname}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  async signUp(): Promise<void> {
    const name = `b${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const signup = await this.request("/auth/signup", {
      body: { email: `${name}@example.com`, password: "correct horse battery", username: name, organization: name },
    });
    this.token = String(signup.access_token);
    this.key = String((await this.request("/auth/api-keys", { body: { name: "browser-tests" } })).key);
  }

  async knowledgeBase(name: string, text: string): Promise<string> {
    const kb = String((await this.request("/v1/knowledge-base", { auth: "key", body: { name } })).id);
    const file = {
      type: "file",
      raw_bytes: Buffer.from(text).toString("base64"),
      metadata: { name: `${name}.md`, mime_type: "text/markdown", path: `/docs/${name}.md` },
    };
    await this.request(`/v1/knowledge-base/${kb}/index`, { auth: "key", body: { file_data: { file } } });
    return kb;
  }

  async connection(name: string, host: string): Promise<void> {
    await this.request("/admin/connections/create", {
      body: {
        name,
        kind: "openai",
        base_url: `http://${host}/v1`,
        secret: "sk-fake",
        chat_model: "fake",
        transcription_model: "fake-whisper",
      },
    });
  }

  async publishedAgent(name: string, description: string): Promise<string> {
    const added = await this.request("/agents/add", { body: { name, description, tags: ["support", "<b>tag</b>"] } });
    const id = String((added.agent as { _id: string })._id);
    await this.request("/agents/publish", { body: { agent_id: id, category: "Support" } });
    return id;
  }

  async undeploy(chatbotId: string): Promise<void> {
    await this.request(`/chatbots/undeploy/${chatbotId}`, { method: "DELETE" });
  }

  async chatbot(
    fields: Record<string, unknown>,
    deployment: Record<string, unknown>,
    access?: Record<string, unknown>,
  ): Promise<string> {
    const id = String(
      (
        await this.request("/v1/chatbot", {
          auth: "key",
          body: { name: `bot-${Math.random().toString(36).slice(2, 10)}`, description: "a test bot", ...fields },
        })
      ).id,
    );
    await this.request("/chatbots/deploy", { body: { chatbot_id: id, ...deployment } });
    if (access) await this.request("/chatbots/update/access", { body: { chatbot_id: id, ...access } });
    return id;
  }
}
