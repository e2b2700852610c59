/**
 * A scan from the cache (scan-cache.ts) lists everything again but changes only what differs: the
 * listing is merged with the cached object rows (both in key order), and only keys that are new, gone
 * or listed with another size or class are written. A new row is matched against every reference
 * (scan-closure.ts markNew), its entry is read from the item store, and a gone row gives back what
 * only its presence satisfied (a typed reference to it names its digest again; an archived original
 * whose copy it was is kept by its digest again). What the cache must never answer for is dropped when
 * it is loaded and listed as new: cold objects (S3's checksums are read again), mutable documents
 * (their entry may have been deleted, which no change log reports), objects whose bytes could not be
 * scanned, and digests taken from observations rather than bytes.
 */
import type { ObjectInfo } from '../content/content-store.ts';
import { compareUtf8, MUTABLE_PREFIXES } from '../core/object-keys.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId, getRefIndexEntries } from '../system/ref-index.ts';
import { inParallel, listedCold, type Progress } from './scan-objects.ts';
import { prefixEnd, type Workset } from './scan-workset.ts';

const PAGE = 1000;

/** The listing broke key order, so it cannot be merged with the cached rows: the scan starts whole instead. */
export class ListingOutOfOrder extends Error {}

interface CachedRow {
  key: string;
  size: number;
  cls: string | null;
  cold: number;
}

/** Drops the rows the cache must not answer for (module comment) and the digests it only guessed. */
export function prepareCached(ws: Workset): void {
  const db = ws.db;
  ws.tx(() => {
    const keys = db.prepare('SELECT key FROM objects WHERE cold = 1 UNION SELECT key FROM failed').pluck().all() as string[];
    const range = db.prepare('SELECT key FROM objects WHERE key >= ? AND key < ?').pluck();
    for (const p of MUTABLE_PREFIXES) keys.push(...(range.all(p, prefixEnd(p)) as string[]));
    for (const k of keys) ws.invalidate(k);
    db.exec('DELETE FROM failed');
    db.exec('UPDATE objects INDEXED BY objects_guess SET digest = NULL, guess = 0 WHERE guess = 1');
  });
}

/**
 * Once changes are folded: a cached row whose digest differs from one the items now record is
 * listed again as new (its entry no longer answers; its bytes decide). Clears the fresh marks.
 */
export function checkRecorded(ws: Workset, rows: boolean): void {
  ws.tx(() => {
    if (rows) {
      const stale = ws.db
        .prepare(
          `SELECT o.key FROM recorded r INDEXED BY recorded_fresh JOIN objects o ON o.key = r.key
           WHERE r.fresh = 1 AND o.digest IS NOT NULL AND o.digest != r.digest AND o.bad IS NULL`,
        )
        .pluck()
        .all() as string[];
      for (const k of stale) ws.invalidate(k);
    }
    ws.db.exec('UPDATE recorded SET fresh = 0 WHERE fresh = 1');
  });
}

/** Merges each prefix's listing with the cached rows; returns how many objects were listed. */
export async function diffListing(ctx: ServiceContext, ws: Workset, prefixes: readonly string[], progress: Progress): Promise<number> {
  let count = 0;
  let seen = 0;
  await inParallel(prefixes, prefixes.length, async (prefix) => {
    count += await diffPrefix(ctx, ws, prefix, (n) => progress('list', (seen += n)));
  });
  applyDiff(ws);
  return count;
}

async function diffPrefix(ctx: ServiceContext, ws: Workset, prefix: string, progress: (n: number) => void): Promise<number> {
  // One lower bound per query: with two, SQLite starts the range at one and filters by the other (every page re-read from the prefix).
  const first = ws.db.prepare('SELECT key, size, cls, cold FROM objects WHERE key >= ? AND key < ? ORDER BY key LIMIT ?');
  const page = ws.db.prepare('SELECT key, size, cls, cold FROM objects WHERE key > ? AND key < ? ORDER BY key LIMIT ?');
  const end = prefixEnd(prefix);
  let rows = first.all(prefix, end, PAGE) as CachedRow[];
  let i = 0;
  // The next cached row not yet matched (pages are read ahead of any write: new rows wait in listed_new).
  const head = (): CachedRow | undefined => {
    if (i < rows.length) return rows[i];
    if (rows.length === 0) return undefined;
    rows = page.all((rows[rows.length - 1] as CachedRow).key, end, PAGE) as CachedRow[];
    i = 0;
    return rows[0];
  };
  let added: ObjectInfo[] = [];
  let gone: string[] = [];
  const flush = () => {
    const [a, g] = [added, gone];
    [added, gone] = [[], []];
    ws.tx(() => {
      for (const k of g) ws.listedGone(k);
      for (const o of a) ws.listedNew(o, listedCold(ctx, o));
    });
  };
  let listed = 0;
  let last: string | undefined;
  for await (const o of ctx.content.list(prefix)) {
    if (last !== undefined && compareUtf8(o.key, last) <= 0) throw new ListingOutOfOrder(`${o.key} listed after ${last}`);
    last = o.key;
    listed++;
    let h = head();
    for (; h && compareUtf8(h.key, o.key) < 0; i++, h = head()) gone.push(h.key);
    if (h?.key === o.key) {
      i++;
      if (h.size !== o.size || h.cls !== (o.storageClass ?? null) || h.cold !== (listedCold(ctx, o) ? 1 : 0)) {
        gone.push(h.key);
        added.push(o);
      }
    } else added.push(o);
    if (added.length + gone.length >= PAGE) flush();
    if (listed % PAGE === 0) progress(PAGE);
  }
  for (let h = head(); h; i++, h = head()) gone.push(h.key);
  flush();
  return listed;
}

/** Applies the listing's differences: gone rows give back what they satisfied; new rows are fresh. */
function applyDiff(ws: Workset): void {
  ws.tx(() =>
    ws.db.exec(`
      UPDATE typed SET fresh = 1 WHERE key IN (SELECT key FROM listed_gone);
      UPDATE digests SET fresh = 1 WHERE digest IN (SELECT s.digest FROM sup_keys s JOIN listed_gone g ON g.key = s.copy);
      DELETE FROM inner WHERE key IN (SELECT key FROM listed_gone);
      DELETE FROM entries WHERE key IN (SELECT key FROM listed_gone);
      DELETE FROM objects WHERE key IN (SELECT key FROM listed_gone);
      INSERT OR REPLACE INTO objects(key, size, cls, cold, fresh) SELECT key, size, cls, cold, 1 FROM listed_new;
      DELETE FROM listed_gone;
      DELETE FROM listed_new;`),
  );
}

/** The entries of new rows that the folded changes did not bring, read from the item store. */
export async function entriesOfNew(ctx: ServiceContext, ws: Workset): Promise<void> {
  const next = ws.db
    .prepare(
      `SELECT o.key FROM objects o INDEXED BY objects_fresh WHERE o.fresh = 1 AND o.key > ?
       AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.key = o.key) ORDER BY o.key LIMIT ?`,
    )
    .pluck();
  const root = contentRootId(ctx.content.location);
  for (let after = ''; ; ) {
    const keys = next.all(after, PAGE) as string[];
    if (keys.length === 0) return;
    after = keys[keys.length - 1] as string;
    const found = await getRefIndexEntries(ctx.items, root, ctx.layout.index_shards, keys);
    ws.tx(() => {
      for (const e of found.values()) ws.entry(e);
    });
  }
}
