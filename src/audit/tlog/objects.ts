/**
 * The transparency log's objects in the content store (docs/audit-format.md §4): C2SP tiles at
 * `tlog/tile/<L>/<N>[.p/<W>]`, entry bundles at `tlog/tile/entries/<N>[.p/<W>]` and batch manifests at
 * `tlog/batches/<start>.json`, all create-only (content-store.ts isCreateOnlyKey): a partial tile of a
 * new width is a new object, never an overwrite, and a round redone after a crash writes the same
 * bytes. They are read unverified (`readRaw`: no digest is recorded for them); what they hold is
 * checked against a signed root instead (a proof, or the root recomputed from them).
 */
import { buffer } from 'node:stream/consumers';
import type { ContentStore } from '../../content/content-store.ts';
import { InvalidInput, NotFound } from '../../core/errors.ts';
import { HASH_SIZE } from './merkle.ts';
import { TILE_HEIGHT, type TileAddress, type TileReader, tilePath } from './tiles.ts';

export const TLOG_PREFIX = 'tlog/';
export const BUNDLE_WIDTH = 2 ** TILE_HEIGHT;

export const tileKey = (t: TileAddress) => `${TLOG_PREFIX}${tilePath(t)}`;
/** Entry bundle N (leaves [256N, 256N + width)). */
export const bundleKey = (index: number, width: number) =>
  `${TLOG_PREFIX}tile/entries/${tilePath({ level: 0, index, width }).slice('tile/0/'.length)}`;
export const manifestKey = (start: number) => `${TLOG_PREFIX}batches/${String(start).padStart(12, '0')}.json`;

/**
 * The objects this process last wrote or read, per content store: they are create-only, so a key's
 * bytes never change and a round reads the right edge its predecessor wrote from memory, not from
 * the store (a few reads and directory listings per round). Bounded; forgotten with forgetObjects.
 */
const recent = new WeakMap<ContentStore, Map<string, Buffer>>();
const RECENT_OBJECTS = 256;

function remember(content: ContentStore, key: string, bytes: Uint8Array): void {
  let m = recent.get(content);
  if (!m) recent.set(content, (m = new Map()));
  m.delete(key);
  m.set(key, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  if (m.size > RECENT_OBJECTS) m.delete(m.keys().next().value as string);
}

/** Forgets the remembered objects (objects removed behind this process's back: a test's restore). */
export function forgetObjects(content: ContentStore): void {
  recent.delete(content);
}

/**
 * The object's bytes, or undefined when absent. `fresh`: from the store, never from memory (a
 * verifier checks what is stored, not what this process remembers writing).
 */
export async function readObject(content: ContentStore, key: string, fresh = false): Promise<Buffer | undefined> {
  const known = fresh ? undefined : recent.get(content)?.get(key);
  if (known) return known;
  try {
    const bytes = await buffer(await content.readRaw(key));
    remember(content, key, bytes);
    return bytes;
  } catch (e) {
    if (e instanceof NotFound) return undefined;
    throw e;
  }
}

export async function writeObject(content: ContentStore, key: string, bytes: Uint8Array): Promise<void> {
  await content.put(key, [bytes]);
  remember(content, key, bytes);
}

/** Several objects made durable together (their fsyncs overlap on the fs engine): staged, then published at once. */
export async function writeObjects(content: ContentStore, objects: ReadonlyArray<{ key: string; bytes: Uint8Array }>): Promise<void> {
  const staged = await Promise.all(objects.map((o) => content.stage(o.key, [o.bytes])));
  try {
    await content.publish(staged);
  } catch (e) {
    await content.discard(staged).catch(() => undefined);
    throw e;
  }
  for (const o of objects) remember(content, o.key, o.bytes);
}

/**
 * An object of `width` or, when absent, the narrowest wider one (a wider tile or bundle serves a
 * narrower read: the log only appends): the full one, else a wider partial one listed under `.p/`.
 */
async function readAtLeast(
  content: ContentStore,
  keyOf: (width: number) => string,
  width: number,
  fresh: boolean,
): Promise<Buffer | undefined> {
  const exact = await readObject(content, keyOf(width), fresh);
  if (exact || width === BUNDLE_WIDTH) return exact;
  const full = await readObject(content, keyOf(BUNDLE_WIDTH), fresh);
  if (full) return full;
  const dir = `${keyOf(BUNDLE_WIDTH)}.p/`;
  let best: number | undefined;
  for (const o of (await content.listPage(dir, { limit: BUNDLE_WIDTH })).objects) {
    const w = Number(o.key.slice(dir.length));
    if (Number.isInteger(w) && w > width && (best === undefined || w < best)) best = w;
  }
  return best === undefined ? undefined : readObject(content, keyOf(best), fresh);
}

/** Tiles from the content store (readAtLeast: a wider tile serves a narrower read); `fresh`: as readObject. */
export function contentTileReader(content: ContentStore, fresh = false): TileReader {
  return {
    readTiles: (tiles) =>
      Promise.all(
        tiles.map(async (t) => {
          const data = await readAtLeast(content, (width) => tileKey({ ...t, width }), t.width, fresh);
          if (!data || data.length < t.width * HASH_SIZE)
            throw new NotFound(`the transparency log's tile ${tileKey(t)} is missing or short`, { key: tileKey(t) });
          return data;
        }),
      ),
  };
}

/** One leaf's entry: the chain entry it stands for and its hash (the leaf data is the hash's 32 bytes). */
export interface LeafEntry {
  artifact_id: string;
  seq: number;
  hash: string;
}

/** An entry bundle: one JSON line per leaf, `{"a":…,"s":…,"h":…}`. */
export function formatBundle(entries: readonly LeafEntry[]): Buffer {
  return Buffer.from(entries.map((e) => `${JSON.stringify({ a: e.artifact_id, s: e.seq, h: e.hash })}\n`).join(''), 'utf8');
}

export function parseBundle(bytes: Buffer, key: string): LeafEntry[] {
  const text = bytes.toString('utf8');
  if (text.length === 0) return [];
  if (!text.endsWith('\n')) throw new InvalidInput(`entry bundle ${key} does not end with a newline`);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => {
      const o = JSON.parse(line) as { a?: unknown; s?: unknown; h?: unknown };
      if (typeof o.a !== 'string' || typeof o.s !== 'number' || typeof o.h !== 'string')
        throw new InvalidInput(`entry bundle ${key} has a malformed line`);
      return { artifact_id: o.a, seq: o.s, hash: o.h };
    });
}

/** The leaves [start, end) from their bundles (the bundles of a tree of at least `end` leaves); `fresh`: as readObject. */
export async function readLeafEntries(content: ContentStore, start: number, end: number, fresh = false): Promise<LeafEntry[]> {
  const out: LeafEntry[] = [];
  for (let n = Math.floor(start / BUNDLE_WIDTH); n * BUNDLE_WIDTH < end; n++) {
    const width = Math.min(BUNDLE_WIDTH, end - n * BUNDLE_WIDTH);
    const key = bundleKey(n, width);
    const bytes = await readAtLeast(content, (w) => bundleKey(n, w), width, fresh);
    if (!bytes) throw new NotFound(`the transparency log's entry bundle ${key} is missing`, { key });
    const entries = parseBundle(bytes, key);
    if (entries.length < width) throw new InvalidInput(`entry bundle ${key} holds ${entries.length} entries, not ${width}`);
    for (let i = 0; i < width; i++) {
      const leaf = n * BUNDLE_WIDTH + i;
      if (leaf >= start && leaf < end) out.push(entries[i] as LeafEntry);
    }
  }
  return out;
}

/** The bundles to write when leaves `added` follow a tree of `size` leaves (the partial one extended). */
export async function bundlesAfter(
  content: ContentStore,
  size: number,
  added: readonly LeafEntry[],
): Promise<Array<{ key: string; bytes: Buffer }>> {
  const firstBundle = Math.floor(size / BUNDLE_WIDTH);
  const kept = size % BUNDLE_WIDTH === 0 ? [] : await readLeafEntries(content, firstBundle * BUNDLE_WIDTH, size);
  const row = [...kept, ...added];
  const out: Array<{ key: string; bytes: Buffer }> = [];
  for (let at = 0; at < row.length; at += BUNDLE_WIDTH) {
    const part = row.slice(at, at + BUNDLE_WIDTH);
    out.push({ key: bundleKey(firstBundle + at / BUNDLE_WIDTH, part.length), bytes: formatBundle(part) });
  }
  return out;
}
