/**
 * How a knowledge base's chunks are spread over its index objects (shards). A document's chunks
 * all live in one shard, chosen by a 32-bit hash of the document id: each shard owns a range of
 * hashes, so a document's writes and its deletion reach one object, and a shard splits by cutting
 * its range in two. Shard 0 is the object named by the knowledge base id (every index made before
 * sharding is shard 0 of a one-shard map) and holds the map (shard-splitter.ts).
 */
export interface ShardInfo {
  /** 0 for the object named by the knowledge base id, then in order of creation. */
  index: number;
  /** Document hashes [lo, hi) this shard owns. */
  lo: number;
  hi: number;
}

export interface ShardMap {
  /** Bumped by every split; every shard call carries it, so a stale caller retries with the new map. */
  version: number;
  shards: ShardInfo[];
}

export const HASH_SPACE = 2 ** 32;

/** The map of a knowledge base that never split. */
export const SINGLE_SHARD: ShardMap = { version: 0, shards: [{ index: 0, lo: 0, hi: HASH_SPACE }] };

/** FNV-1a over the id's UTF-16 code units: stable across isolates and cheap. */
export function documentHash(documentId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < documentId.length; i++) {
    h ^= documentId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The object name of a shard: the knowledge base id itself for shard 0, so existing data stays reachable. */
export function shardName(kbId: string, index: number): string {
  return index === 0 ? kbId : `${kbId}#shard-${index}`;
}

export function owns(shard: Pick<ShardInfo, "lo" | "hi">, documentId: string): boolean {
  const h = documentHash(documentId);
  return h >= shard.lo && h < shard.hi;
}

/** The shard that holds a document. */
export function shardOf(map: ShardMap, documentId: string): ShardInfo {
  const h = documentHash(documentId);
  return map.shards.find((s) => h >= s.lo && h < s.hi) ?? map.shards[0];
}

/** Items grouped by the shard their document belongs to. */
export function groupByShard<T>(map: ShardMap, items: T[], documentOf: (item: T) => string): Map<number, T[]> {
  const out = new Map<number, T[]>();
  for (const item of items) {
    const index = shardOf(map, documentOf(item)).index;
    const list = out.get(index);
    if (list) list.push(item);
    else out.set(index, [item]);
  }
  return out;
}

/**
 * A chunk's key in a merged ranking: its rowid, then its shard. A split copies chunks with their
 * rowids, so chunks written before any split keep the rowid order one object gives ties.
 */
export const SHARD_KEY_SPACE = 1024;
export function globalKey(shard: number, rowid: number): number {
  return rowid * SHARD_KEY_SPACE + shard;
}
export function splitKey(key: number): { shard: number; rowid: number } {
  return { shard: key % SHARD_KEY_SPACE, rowid: Math.floor(key / SHARD_KEY_SPACE) };
}
