import { escapeHtml, htmlPage } from "../../lib/pages";

interface PublicAgent {
  name: string;
  description?: string | null;
  tags?: string[];
  category?: string | null;
  author?: string | null;
  publishedAt?: string | null;
  favorites?: number;
  imports?: number;
}

/** The public agent page for a browser: the same public fields as the JSON, every one escaped, no script. */
export function agentPage(agent: PublicAgent): Response {
  const facts: [string, string][] = [];
  if (agent.category) facts.push(["Category", agent.category]);
  if (agent.author) facts.push(["Author", agent.author]);
  if (agent.publishedAt) facts.push(["Published", agent.publishedAt.slice(0, 10)]);
  facts.push(["Favorites", String(agent.favorites ?? 0)], ["Imports", String(agent.imports ?? 0)]);
  const tags = (agent.tags ?? []).map((tag) => `<li class="chip">${escapeHtml(tag)}</li>`).join("");
  const body = [
    '<main id="loom-chat" class="page">',
    `<header><span class="avatar" aria-hidden="true">${escapeHtml(agent.name.slice(0, 1).toUpperCase())}</span><h1>${escapeHtml(agent.name)}</h1></header>`,
    '<div class="log">',
    agent.description ? `<p>${escapeHtml(agent.description)}</p>` : "",
    `<dl>${facts.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join("")}</dl>`,
    tags ? `<ul class="chips" aria-label="Tags">${tags}</ul>` : "",
    "</div></main>",
  ].join("\n");
  return htmlPage({ title: `${agent.name} · Loom agent`, frameAncestors: "none", styles: ["/chat.css"], body });
}
