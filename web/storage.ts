// Where the chat page keeps the visitor's session and conversation between page loads, always in
// Loom's own origin. First choice: localStorage. Framed by another site, Chromium (by default) and
// other browsers that block third-party storage deny localStorage to the frame; a partitioned
// cookie (CHIPS: `Partitioned; Secure; SameSite=None`) is still allowed there and is kept per
// top-level site, so the widget's conversation survives a reload of the page that embeds it.
// The cookie's path is the chat page itself: it goes with no request but that page's own load, and
// no server code reads it (the visitor routes take the session from a header only).

const MAX_AGE_SECONDS = 24 * 60 * 60; // a visitor session lasts 24 h

function localStore(): Storage | null {
  try {
    const store = window.localStorage;
    const probe = "loom-probe";
    store.setItem(probe, "1");
    store.removeItem(probe);
    return store;
  } catch {
    return null;
  }
}

export class VisitorStore {
  private readonly local = localStore();
  private readonly cookieName: string;

  constructor(
    private readonly key: string,
    private readonly path: string,
  ) {
    this.cookieName = key.replace(/[^A-Za-z0-9_-]/g, "_");
  }

  read(): string | null {
    if (this.local) return this.local.getItem(this.key);
    for (const part of document.cookie.split(";")) {
      const [name, ...value] = part.trim().split("=");
      if (name === this.cookieName) {
        try {
          return decodeURIComponent(value.join("="));
        } catch {
          return null;
        }
      }
    }
    return null;
  }

  write(value: string): void {
    try {
      if (this.local) {
        this.local.setItem(this.key, value);
        return;
      }
      // Secure cookies need a secure context (https, or localhost): elsewhere the chat lasts one page view.
      // biome-ignore lint/suspicious/noDocumentCookie: a partitioned cookie is the one store Chromium keeps for a framed chat (localStorage is refused there); the Cookie Store API has no Partitioned attribute
      document.cookie = `${this.cookieName}=${encodeURIComponent(value)}; Path=${this.path}; Max-Age=${MAX_AGE_SECONDS}; SameSite=None; Secure; Partitioned`;
    } catch {
      // Storage refused (private mode, full quota): the chat still works for this page view.
    }
  }
}
