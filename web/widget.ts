// /widget.js: <script src="https://loom.example/widget.js" data-chatbot-id="..." async></script>
// Adds a launcher button to the host page and opens the chat page (/chat/{id}?embed=1) in an
// iframe: the chat runs in Loom's origin, so the host page cannot read the conversation or the
// visitor session. Everything lives in a shadow root so host styles do not leak in. Styles
// are set through the CSSOM (not <style> or style="..."), which a host's strict CSP still allows.
import { icon } from "./icons";

interface PublicProfile {
  name: string;
  primaryColor: string | null;
  position?: "left" | "right";
}

const script = document.currentScript as HTMLScriptElement | null;
const chatbotId = script?.dataset.chatbotId ?? "";
const loomOrigin = script ? new URL(script.src).origin : "";

function css(node: HTMLElement, rules: Record<string, string>): void {
  for (const [name, value] of Object.entries(rules)) node.style.setProperty(name, value);
}

async function mount(): Promise<void> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(chatbotId) || !loomOrigin) return;
  let profile: PublicProfile = { name: "Chat", primaryColor: null };
  try {
    const res = await fetch(`${loomOrigin}/chatbots/deployed/${chatbotId}`, { credentials: "omit" });
    // Undeployed or refused: no launcher at all, nothing to answer.
    if (!res.ok) return;
    profile = ((await res.json()) as { chatbot: PublicProfile }).chatbot;
  } catch {
    return;
  }
  const colour =
    profile.primaryColor && /^#[0-9a-fA-F]{6}$/.test(profile.primaryColor) ? profile.primaryColor : "#2563eb";
  const side = profile.position === "left" ? "left" : "right";

  const host = document.createElement("div");
  host.setAttribute("data-loom-widget", chatbotId);
  const shadow = host.attachShadow({ mode: "open" });
  const launcher = document.createElement("button");
  launcher.type = "button";
  launcher.append(icon("chat", 26));
  launcher.setAttribute("aria-label", `Open chat with ${profile.name}`);
  launcher.setAttribute("aria-expanded", "false");
  css(launcher, {
    position: "fixed",
    bottom: "20px",
    [side]: "20px",
    width: "56px",
    height: "56px",
    "border-radius": "50%",
    border: "none",
    background: colour,
    color: "#fff",
    display: "grid",
    "place-items": "center",
    cursor: "pointer",
    "z-index": "2147483646",
    "box-shadow": "0 4px 12px rgba(0,0,0,.25)",
  });

  const frame = document.createElement("iframe");
  // The chat page (and its ~30 KB of code) loads on first open, not with the host page.
  const chatUrl = `${loomOrigin}/chat/${encodeURIComponent(chatbotId)}?embed=1`;
  frame.title = `Chat with ${profile.name}`;
  frame.setAttribute("allow", "microphone");
  frame.hidden = true;
  css(frame, {
    position: "fixed",
    bottom: "88px",
    [side]: "20px",
    width: "min(400px, calc(100vw - 40px))",
    height: "min(600px, calc(100vh - 120px))",
    border: "none",
    "border-radius": "12px",
    "box-shadow": "0 8px 32px rgba(0,0,0,.3)",
    "z-index": "2147483647",
    background: "#fff",
  });
  launcher.setAttribute("aria-controls", "loom-frame");
  frame.id = "loom-frame";

  let loaded = false;
  const setOpen = (open: boolean): void => {
    if (open && !frame.src) frame.src = chatUrl;
    frame.hidden = !open;
    css(frame, { display: open ? "block" : "none" });
    launcher.setAttribute("aria-expanded", String(open));
    launcher.setAttribute("aria-label", open ? `Close chat with ${profile.name}` : `Open chat with ${profile.name}`);
    if (open) {
      frame.focus();
      if (loaded) frame.contentWindow?.postMessage({ type: "loom:focus" }, loomOrigin);
    } else {
      launcher.focus();
    }
  };
  css(frame, { display: "none" });
  launcher.addEventListener("click", () => setOpen(frame.hidden));
  frame.addEventListener("load", () => {
    loaded = true;
    if (!frame.hidden) frame.contentWindow?.postMessage({ type: "loom:focus" }, loomOrigin);
  });
  // Only the chat page in our own iframe may close the panel.
  window.addEventListener("message", (event) => {
    if (
      event.origin === loomOrigin &&
      event.source === frame.contentWindow &&
      (event.data as { type?: string } | null)?.type === "loom:close"
    )
      setOpen(false);
  });
  shadow.append(launcher, frame);
  document.body.append(host);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => void mount());
else void mount();
