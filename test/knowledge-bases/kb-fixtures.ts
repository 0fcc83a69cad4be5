import { bearer, call, json } from "../helpers";

export type Body = Record<string, unknown>;

export async function send(
  path: string,
  apiKey: string,
  init: RequestInit = {},
): Promise<{ status: number; body: Body }> {
  const response = await call(path, {
    ...init,
    headers: { ...bearer(apiKey), ...(init.headers as Record<string, string> | undefined) },
  });
  return { status: response.status, body: (await response.json()) as Body };
}

export const post = (path: string, apiKey: string, body: unknown) => send(path, apiKey, json(body));

export async function createKb(apiKey: string, body: Body = {}): Promise<string> {
  const res = await post("/v1/knowledge-base", apiKey, { name: `kb-${crypto.randomUUID()}`, ...body });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return String(res.body.id);
}

export function b64(text: string | Uint8Array): string {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export function fileData(name: string, mime: string, content: string | Uint8Array, custom?: Body): Body {
  return {
    file_data: {
      file: { type: "file", raw_bytes: b64(content), metadata: { name, mime_type: mime, path: `/docs/${name}` } },
      ...(custom ? { custom_metadata: custom } : {}),
    },
  };
}

export async function indexText(
  apiKey: string,
  kbId: string,
  name: string,
  text: string,
  custom?: Body,
  mime = "text/plain",
): Promise<string> {
  const res = await post(`/v1/knowledge-base/${kbId}/index`, apiKey, fileData(name, mime, text, custom));
  if (res.status !== 200) throw new Error(`index failed: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.document_ids as string[])[0];
}

export async function query(
  apiKey: string,
  kbId: string,
  body: Body,
): Promise<{ status: number; body: Body; items: Body[] }> {
  const res = await post(`/v1/knowledge-base/${kbId}/query`, apiKey, body);
  const result = (res.body.result ?? {}) as Body;
  const items = (result.chunks ?? result.documents ?? result.pages ?? []) as Body[];
  return { ...res, items };
}

export const CORPUS: Record<string, { text: string; meta: Body }> = {
  whales: {
    text: "Whales are marine mammals. The blue whale is the largest animal known to have ever existed. Whales breathe air through blowholes.",
    meta: { topic: "animals", year: 2020, tags: ["ocean", "mammal"] },
  },
  volcano: {
    text: "A volcano is a rupture in the crust of a planet. Lava, volcanic ash and gases escape from a magma chamber below the surface.",
    meta: { topic: "geology", year: 2018, tags: ["earth"] },
  },
  bread: {
    text: "Sourdough bread is made by fermenting dough with wild yeast and lactobacilli. The starter gives the bread its sour taste.",
    meta: { topic: "cooking", year: 2022, tags: ["food", "baking"] },
  },
  rockets: {
    text: "Rockets carry their own oxidiser, so their engines work in the vacuum of space. Liquid fuel rockets pump propellant into a combustion chamber.",
    meta: { topic: "space", year: 2021, draft: true },
  },
};

export async function seedCorpus(apiKey: string, kbId: string): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const [name, { text, meta }] of Object.entries(CORPUS))
    ids[name] = await indexText(apiKey, kbId, `${name}.txt`, text, meta);
  return ids;
}
