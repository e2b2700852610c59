/**
 * The reference index (issue 17 item 1; docs/design.md §6 "reference index"): content is immutable, so
 * the digests named inside an object never change. They are recorded once, when the object is written
 * (the pass that hashes it reads every byte: the same 64 KiB straddling and bounded-gzip rules as the
 * retention scan), in one entry per object, and the retention scan reads the entries instead of the
 * bytes. Seed 004's conservative rule stays with the readers: an object without an entry, with an
 * entry that does not parse, or whose entry disagrees with the listing (size) or with the digest the
 * items record, is read and scanned, never assumed clean. An entry with `overflow` (more digests than an
 * item holds) says "scan me": it is never a reason to skip the bytes.
 *
 * Entries live in REFIDX#{root}{#s} / OBJ#{key} (core/keys.ts refIndexPk, s = the directory's shard, or the key's for top-level directories): per content root (paths are
 * installation-local), sharded like the object's observation. They are bookkeeping, not references:
 * the retention scan skips items of type `ref_index` (their digests name what is INSIDE an object, which
 * matters only when that object is itself referenced).
 */
import { sha256 } from '../core/digest.ts';
import { REF_INDEX_SK_PREFIX, refIndexPartitions, refIndexPk, refIndexSk } from '../core/keys.ts';
import type { Item, ItemKey, ItemStore } from '../store/item-store.ts';

export const REF_INDEX_TYPE = 'ref_index';
/** Inner digests one entry holds (71 bytes each: ~213 KB, well under DynamoDB's 400 KB item). More: `overflow`. */
export const MAX_INDEXED_DIGESTS = 3000;

/** A content root's id: observations and index entries are per installation and content location. */
export function contentRootId(location: string): string {
  return sha256(location).slice('sha256:'.length, 'sha256:'.length + 16);
}

export interface RefIndexEntry {
  /** The object key. */
  key: string;
  /** sha256 of the whole object as written. */
  digest: string;
  size: number;
  /** Every `sha256:…` found in the bytes (and in the decompressed bytes of a gzip object), sorted. */
  digests: string[];
  /** More digests than MAX_INDEXED_DIGESTS: the entry lists none and readers must scan the bytes. */
  overflow?: boolean;
  indexed_at: string;
}

export function refIndexKey(root: string, objectKey: string, indexShards: number): ItemKey {
  return { PK: refIndexPk(root, objectKey, indexShards), SK: refIndexSk(objectKey) };
}

export function refIndexItem(root: string, indexShards: number, entry: RefIndexEntry): Item {
  const overflow = entry.overflow === true || entry.digests.length > MAX_INDEXED_DIGESTS;
  return {
    ...refIndexKey(root, entry.key, indexShards),
    type: REF_INDEX_TYPE,
    key: entry.key,
    digest: entry.digest,
    size: entry.size,
    digests: overflow ? [] : [...new Set(entry.digests)].sort(),
    ...(overflow ? { overflow: true } : {}),
    indexed_at: entry.indexed_at,
  };
}

/** The entry an item holds, or undefined when it is not a well-formed entry (then: scan the bytes). */
export function entryOf(item: Item | undefined): RefIndexEntry | undefined {
  if (!item || item.type !== REF_INDEX_TYPE) return undefined;
  const { key, digest, size, digests, overflow, indexed_at } = item;
  if (typeof key !== 'string' || typeof digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(digest)) return undefined;
  if (typeof size !== 'number' || !Array.isArray(digests) || digests.some((d) => typeof d !== 'string')) return undefined;
  return {
    key,
    digest,
    size,
    digests: digests as string[],
    ...(overflow === true ? { overflow: true } : {}),
    indexed_at: String(indexed_at),
  };
}

export async function putRefIndexEntry(items: ItemStore, root: string, indexShards: number, entry: RefIndexEntry): Promise<void> {
  await items.put(refIndexItem(root, indexShards, entry));
}

export async function deleteRefIndexEntry(items: ItemStore, root: string, indexShards: number, objectKey: string): Promise<void> {
  await items.delete(refIndexKey(root, objectKey, indexShards));
}

/** The well-formed entries of `keys` (absent or malformed ones are left out), by object key. */
export async function getRefIndexEntries(
  items: ItemStore,
  root: string,
  indexShards: number,
  keys: readonly string[],
): Promise<Map<string, RefIndexEntry>> {
  const out = new Map<string, RefIndexEntry>();
  for (let i = 0; i < keys.length; i += 100) {
    const found = await items.batchGet(
      keys.slice(i, i + 100).map((k) => refIndexKey(root, k, indexShards)),
      { consistent: true },
    );
    for (const item of found) {
      const e = entryOf(item);
      if (e) out.set(e.key, e);
    }
  }
  return out;
}

/** Every entry of a content root, streamed page by page over its partitions (bounded memory). */
export async function* allRefIndexEntries(items: ItemStore, root: string, indexShards: number): AsyncIterable<RefIndexEntry> {
  for (const pk of refIndexPartitions(root, indexShards)) {
    let cursor: string | undefined;
    do {
      const page = await items.query({ pk, sk: { beginsWith: REF_INDEX_SK_PREFIX }, consistent: true, ...(cursor ? { cursor } : {}) });
      for (const item of page.items) {
        const e = entryOf(item);
        if (e) yield e;
      }
      cursor = page.cursor;
    } while (cursor);
  }
}
