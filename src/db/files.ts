import type { Env } from "../env";

/**
 * The one module that talks to R2 (the FILES binding): knowledge-base originals and chatbot
 * attachments are written, listed and deleted here, so the binding's limits are handled once.
 */

/** R2 deletes at most this many keys per call (a longer list is refused), so deletes go in batches. */
export const R2_DELETE_BATCH = 1000;

export interface FileMetadata {
  contentType: string;
  /** Small string pairs kept with the object (R2 custom metadata), for an operator browsing the bucket. */
  custom?: Record<string, string>;
}

export async function putFile(env: Env, key: string, bytes: Uint8Array, metadata: FileMetadata): Promise<void> {
  await env.FILES.put(key, bytes, {
    httpMetadata: { contentType: metadata.contentType },
    ...(metadata.custom ? { customMetadata: metadata.custom } : {}),
  });
}

/** The bytes stored under `key`, or null when there is no such object. */
export async function readFile(env: Env, key: string): Promise<Uint8Array | null> {
  const object = await env.FILES.get(key);
  return object ? new Uint8Array(await object.arrayBuffer()) : null;
}

/**
 * Deletes every key given (absent keys are not an error), `batch` (R2's limit) at a time, one batch
 * after another so a large deletion never holds more than one request open.
 */
export async function deleteFiles(
  env: Env,
  keys: Iterable<string | null | undefined>,
  batch = R2_DELETE_BATCH,
): Promise<void> {
  const unique = [...new Set([...keys].filter((k): k is string => typeof k === "string" && k.length > 0))];
  for (let i = 0; i < unique.length; i += batch) await env.FILES.delete(unique.slice(i, i + batch));
}

/** Every key under `prefix`, read page by page (R2 answers at most 1,000 keys a page). */
export async function listFileKeys(env: Env, prefix: string, pageSize = 1000): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.FILES.list({ prefix, cursor, limit: pageSize });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys;
}
