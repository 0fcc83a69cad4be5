// The chat page (/chat/{chatbot_id}), full page or inside the widget's iframe (?embed=1).
import { VisitorApi, VisitorError, type Message, type Profile, type RunResult, type Source } from "./api";
import { button, el } from "./dom";
import { icon } from "./icons";
import { renderMarkdown } from "./markdown";
import { canRecord, voiceButton, type Recording } from "./voice";

const root = document.getElementById("loom-chat") as HTMLElement;
const chatbotId = root.dataset.chatbotId ?? "";
const embedded = root.dataset.embed === "1";
const api = new VisitorApi(chatbotId);

const title = el("h1", { id: "loom-title", text: "Chat" });
const avatar = el("span", { class: "avatar", "aria-hidden": "true" });
const newButton = button("New conversation", () => startOver());
const header = el("header", {}, avatar, title, newButton);
const alertBox = el("p", { class: "alert", role: "alert" });
const log = el("div", { class: "log", role: "log", "aria-labelledby": "loom-title", tabindex: "0" });
const announcer = el("p", { class: "sr-only", "aria-live": "polite" });
const suggestions = el("div", { class: "chips", role: "group", "aria-label": "Suggested questions" });
const input = el("textarea", { id: "loom-input", rows: "1", maxlength: "4000", placeholder: "Type your message" });
const sendButton = el("button", { type: "submit", text: "Send" });
const fileInput = el("input", {
  type: "file",
  id: "loom-file",
  accept: ".txt,.md,.csv,.json,text/plain,text/markdown,text/csv,application/json",
  class: "sr-only",
});
// Shown only where the chatbot allows them (applyTheme): uploads, and the microphone.
const attachLabel = el(
  "label",
  { for: "loom-file", class: "attach", title: "Attach a file", hidden: "" },
  icon("attach"),
  el("span", { class: "sr-only", text: "Attach a file" }),
);
fileInput.disabled = true;
const micButton = voiceButton({
  mayStart: () => {
    if (busy) return false;
    if (profile?.access.mode !== "password" || api.hasSession) return true;
    askPassword();
    return false;
  },
  onRecorded: (recording) => deliver(recording, "Voice message"),
  onError: showError,
  announce: (text) => (announcer.textContent = text),
});
const composer = el(
  "form",
  { class: "composer", "aria-label": "Send a message" },
  el("label", { for: "loom-input", class: "sr-only", text: "Message" }),
  input,
  fileInput,
  attachLabel,
  micButton,
  sendButton,
);
const passwordInput = el("input", {
  type: "password",
  id: "loom-password",
  autocomplete: "current-password",
  required: "",
});
const passwordForm = el(
  "form",
  { class: "password", hidden: "" },
  el("label", { for: "loom-password", text: "This chatbot needs a password" }),
  passwordInput,
  el("button", { type: "submit", text: "Continue" }),
);

if (embedded) {
  // The widget's launcher lives on the host page; closing asks it to hide the iframe.
  const close = button("", () => parent.postMessage({ type: "loom:close" }, "*"), {
    "aria-label": "Close chat",
    class: "icon-button",
  });
  close.append(icon("close"));
  header.append(close);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") parent.postMessage({ type: "loom:close" }, "*");
  });
  window.addEventListener("message", (event) => {
    if (event.source === parent && (event.data as { type?: string } | null)?.type === "loom:focus") input.focus();
  });
}
root.append(header, alertBox, log, announcer, suggestions, passwordForm, composer);

let busy = false;
let profile: Profile | null = null;

function showError(message: string): void {
  alertBox.textContent = message;
}

function setBusy(value: boolean): void {
  busy = value;
  sendButton.disabled = value;
  log.setAttribute("aria-busy", String(value));
}

function sourcesBlock(sources: Source[] | undefined): HTMLElement | null {
  if (!sources || sources.length === 0) return null;
  const list = el("ul", { class: "sources", "aria-label": "Sources" });
  for (const source of sources)
    list.append(
      el(
        "li",
        { class: "source" },
        el("strong", { text: source.name ?? "Document" }),
        el("span", { text: source.text.slice(0, 240) }),
      ),
    );
  return list;
}

function feedbackBlock(messageId: string, current: "like" | "dislike" | null): HTMLElement {
  const group = el("div", { class: "feedback", role: "group", "aria-label": "Rate this answer" });
  const make = (value: "like" | "dislike", label: string) => {
    const b = button("", () => void rate(messageId, value, group), {
      "aria-label": label,
      "aria-pressed": String(current === value),
      "data-feedback": value,
    });
    b.append(icon(value));
    return b;
  };
  group.append(make("like", "Helpful"), make("dislike", "Not helpful"));
  return group;
}

async function rate(messageId: string, value: "like" | "dislike", group: HTMLElement): Promise<void> {
  const pressed = group.querySelector(`[data-feedback="${value}"]`)?.getAttribute("aria-pressed") === "true";
  try {
    await api.like(messageId, pressed ? "none" : value);
    for (const b of group.querySelectorAll("button"))
      b.setAttribute("aria-pressed", String(!pressed && b.dataset.feedback === value));
  } catch (error) {
    showError(error instanceof VisitorError ? error.message : "Could not save your rating.");
  }
}

function followUps(questions: string[]): HTMLElement | null {
  if (questions.length === 0) return null;
  const group = el("div", { class: "chips", role: "group", "aria-label": "Follow-up questions" });
  for (const q of questions) group.append(button(q, () => void send(q), { class: "chip" }));
  return group;
}

function userBubble(text: string): void {
  log.append(el("div", { class: "msg user" }, el("span", { class: "sr-only", text: "You: " }), el("p", { text })));
}

function answerBubble(): HTMLElement {
  const body = el("div", { class: "body" });
  log.append(
    el("div", { class: "msg bot" }, el("span", { class: "sr-only", text: `${profile?.name ?? "Bot"}: ` }), body),
  );
  return body;
}

function finishAnswer(
  body: HTMLElement,
  text: string,
  messageId: string | null,
  sources: Source[] | undefined,
  questions: string[],
  feedback: "like" | "dislike" | null,
): void {
  body.replaceChildren(renderMarkdown(text));
  const extras = [sourcesBlock(sources), followUps(questions), messageId ? feedbackBlock(messageId, feedback) : null];
  for (const extra of extras) if (extra) body.append(extra);
  log.scrollTop = log.scrollHeight;
}

function showGreeting(): void {
  log.replaceChildren();
  if (profile?.greeting) log.append(el("div", { class: "msg bot greeting" }, renderMarkdown(profile.greeting)));
  suggestions.replaceChildren(
    ...(profile?.suggestedQuestions ?? []).map((q) => button(q, () => void send(q), { class: "chip" })),
  );
}

function startOver(): void {
  api.newConversation();
  showGreeting();
  announcer.textContent = "New conversation started.";
  input.focus();
}

async function send(text: string): Promise<void> {
  const trimmed = text.trim();
  if (!trimmed || busy) return;
  if (profile?.access.mode === "password" && !api.hasSession) return askPassword();
  input.value = "";
  return deliver({ text: trimmed }, trimmed);
}

/** Sends a typed or spoken message and streams the answer into a new bubble. */
async function deliver(message: { text: string } | Recording, shown: string): Promise<void> {
  showError("");
  suggestions.replaceChildren();
  userBubble(shown);
  const body = answerBubble();
  const streamed = el("p", {});
  body.append(streamed);
  setBusy(true);
  let result: RunResult;
  try {
    result = await api.send(message, (piece) => {
      streamed.textContent += piece;
      log.scrollTop = log.scrollHeight;
    });
  } catch (error) {
    body.closest(".msg")?.remove();
    handleError(error);
    setBusy(false);
    return;
  }
  setBusy(false);
  if (result.status === "failed") {
    body.replaceChildren(el("p", { class: "error", text: result.error ?? "The chatbot could not answer." }));
    return;
  }
  finishAnswer(body, result.output_message, result.message_id, result.sources, result.follow_up_questions ?? [], null);
  announcer.textContent = result.output_message.slice(0, 500);
}

function handleError(error: unknown): void {
  if (error instanceof VisitorError && error.status === 401 && profile?.access.mode === "password") {
    api.forgetSession();
    askPassword();
    return;
  }
  showError(error instanceof VisitorError ? error.message : "Something went wrong. Please try again.");
}

function askPassword(): void {
  passwordForm.hidden = false;
  composer.hidden = true;
  passwordInput.focus();
}

passwordForm.addEventListener("submit", (event) => {
  event.preventDefault();
  void api
    .login(passwordInput.value)
    .then(() => {
      passwordForm.hidden = true;
      composer.hidden = false;
      passwordInput.value = "";
      showError("");
      input.focus();
    })
    .catch((error: unknown) =>
      showError(
        error instanceof VisitorError && error.status === 401
          ? "That password is not right."
          : error instanceof VisitorError
            ? error.message
            : "Something went wrong.",
      ),
    );
});

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  void send(input.value);
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    void send(input.value);
  }
});
fileInput.addEventListener("change", () => {
  const file = fileInput.files?.[0];
  if (!file) return;
  if (!api.hasSession) return showError("Send a message first, then attach a file.");
  void api
    .upload(file)
    .then(() => (announcer.textContent = `Attached ${file.name}.`))
    .catch((error: unknown) =>
      showError(error instanceof VisitorError ? error.message : "The file could not be attached."),
    )
    .finally(() => (fileInput.value = ""));
});

function applyTheme(p: Profile): void {
  attachLabel.hidden = !p.allowUploads;
  fileInput.disabled = !p.allowUploads;
  micButton.hidden = !(p.speechToText && canRecord());
  title.textContent = p.name;
  document.title = p.name;
  avatar.textContent = p.name.slice(0, 1).toUpperCase();
  // CSSOM custom properties, not inline style attributes: the page's CSP forbids the latter.
  if (p.primaryColor) document.documentElement.style.setProperty("--primary", p.primaryColor);
  if (p.secondaryColor) document.documentElement.style.setProperty("--secondary", p.secondaryColor);
}

function renderHistory(messages: Message[]): void {
  for (const m of messages) {
    if (m.role === "user") userBubble(m.content);
    else if (m.status === "failed")
      answerBubble().append(el("p", { class: "error", text: m.error ?? "The chatbot could not answer." }));
    else finishAnswer(answerBubble(), m.content, m._id, m.sources, m.followUpQuestions ?? [], m.feedback);
  }
}

async function boot(): Promise<void> {
  try {
    profile = await api.profile();
  } catch (error) {
    composer.hidden = true;
    newButton.hidden = true;
    showError(
      error instanceof VisitorError && error.status === 404
        ? "This chatbot is not available right now."
        : error instanceof VisitorError
          ? error.message
          : "This chatbot could not be loaded.",
    );
    return;
  }
  applyTheme(profile);
  showGreeting();
  if (profile.access.mode === "password" && !api.hasSession) return askPassword();
  try {
    const messages = await api.history();
    if (messages.length > 0) {
      suggestions.replaceChildren();
      renderHistory(messages);
    }
  } catch (error) {
    // The stored conversation is gone (expired session, changed access): start a fresh one.
    console.warn("loom: could not restore the conversation", error instanceof Error ? error.message : error);
    api.newConversation();
  }
  root.dataset.ready = "1";
}

void boot();
