import { env } from "cloudflare:test";
import type { KnowledgeBaseIndex } from "../../src/features/knowledge-bases/index/knowledge-base-index";
import type { ShardMap } from "../../src/features/knowledge-bases/index/shard-map";
import { shardName } from "../../src/features/knowledge-bases/index/shard-map";
import { b64, post, type Body } from "./kb-fixtures";

/** A shard's object, as the Worker names it (shard 0 is the knowledge base id). */
export function shardStub(kbId: string, index: number): DurableObjectStub<KnowledgeBaseIndex> {
  return env.KB_INDEX.get(env.KB_INDEX.idFromName(shardName(kbId, index))) as DurableObjectStub<KnowledgeBaseIndex>;
}

export async function shardMap(kbId: string): Promise<ShardMap> {
  return (await shardStub(kbId, 0).shardMap()) as ShardMap;
}

/** Test-only: shard 0 splits past `splitChunks`, one step per splitStep call (never from the alarm). */
export async function forceSmallShards(kbId: string, splitChunks: number, batchChunks = 100): Promise<void> {
  await shardStub(kbId, 0).configureSharding({ splitChunks, batchChunks, manual: true });
}

/** Runs split steps on every shard until none is past its threshold; answers the final map. */
export async function splitUntilSettled(kbId: string): Promise<ShardMap> {
  for (let round = 0; round < 100; round++) {
    const map = await shardMap(kbId);
    let busy = false;
    for (const s of map.shards) {
      while ((await shardStub(kbId, s.index).splitStep()) !== "idle") busy = true;
    }
    if (!busy) return shardMap(kbId);
  }
  throw new Error("splits did not settle");
}

/** Indexes texts in batches of 100 files per request, in order (so two knowledge bases get the same rowids). */
export async function indexBatches(
  apiKey: string,
  kbId: string,
  docs: { name: string; text: string; meta?: Body }[],
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < docs.length; i += 100) {
    const part = docs.slice(i, i + 100);
    const res = await post(`/v1/knowledge-base/${kbId}/index`, apiKey, {
      file_data: part.map((d) => ({
        file: { type: "file", raw_bytes: b64(d.text), metadata: { name: d.name, mime_type: "text/plain" } },
        ...(d.meta ? { custom_metadata: d.meta } : {}),
      })),
    });
    if (res.status !== 200) throw new Error(`index failed: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(...(res.body.document_ids as string[]));
  }
  return ids;
}

/** SMART-format records (".I n" then ".X" fields), as the Cranfield and CISI files are written. */
export function parseSmart(text: string): { id: string; fields: Record<string, string> }[] {
  const records: { id: string; fields: Record<string, string> }[] = [];
  let current: { id: string; fields: Record<string, string> } | null = null;
  let field: string | null = null;
  for (const line of text.split("\n")) {
    const marker = /^\.([A-Z])(?:\s+(\S+))?\s*$/.exec(line);
    if (marker && marker[1] === "I") {
      current = { id: marker[2] ?? "", fields: {} };
      records.push(current);
      field = null;
    } else if (marker && current) {
      field = marker[1];
      current.fields[field] = "";
    } else if (current && field) current.fields[field] += `${line}\n`;
  }
  return records;
}

export interface Collection {
  name: string;
  docs: { name: string; text: string; meta: Body }[];
  queries: string[];
}

const files = import.meta.glob("../../../shared/data/{cranfield,cisi}/*", {
  query: "?raw",
  import: "default",
  eager: true,
}) as Record<string, string>;

function file(path: string): string | undefined {
  return Object.entries(files).find(([p]) => p.endsWith(path))?.[1];
}

/** Cranfield or CISI from ../shared/data, as `npm run eval:retrieval` indexes them (title, blank line, body); undefined when absent. */
export function loadCollection(name: "cranfield" | "cisi"): Collection | undefined {
  const all = file(name === "cranfield" ? "cranfield/cran.all.1400" : "cisi/CISI.ALL");
  const qry = file(name === "cranfield" ? "cranfield/cran.qry" : "cisi/CISI.QRY");
  if (!all || !qry) return undefined;
  const docs = parseSmart(all)
    .map((r) => ({
      id: String(Number(r.id)),
      title: (r.fields.T ?? "").replace(/\s+/g, " ").trim(),
      body: (r.fields.W ?? "").trim(),
    }))
    .filter((d) => `${d.title}${d.body}`.trim() !== "")
    .map((d) => ({
      name: `${name}-${d.id}.txt`,
      text: `${d.title}\n\n${d.body}`,
      meta: { doc: d.id, odd: Number(d.id) % 2 === 1 },
    }));
  const queries = parseSmart(qry).map((r) => (r.fields.W ?? "").replace(/\s+/g, " ").trim());
  return { name, docs, queries };
}
