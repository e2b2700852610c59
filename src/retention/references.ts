/**
 * The reference scan of seed 004 ("Retain references before considering age"): every digest or key
 * named by any base-table item (live state, audit items, packed segments' items), by in-flight uploads,
 * by backup manifests and by host pins, then — transitively — every digest found inside referenced
 * objects (64 KiB reads, matches straddling reads, gzip members included). Conservative: a string that
 * merely looks like a digest or a key keeps its object. Reads the base table only (never GSI1).
 *
 * At scale (issue 17): the scan holds its facts in a working set on disk (scan-workset.ts) and computes
 * the closure in SQL (scan-closure.ts), so its heap does not grow with the installation; it reads the
 * reference index instead of the bytes and indexes what it had to read (scan-objects.ts); the item pass
 * runs in concurrent segments and the prefixes are listed concurrently. `mark` (the item store's change
 * mark, taken before anything is read) lets refreshReferences fold in, under the short fence, only what
 * changed since.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { IntegrityError, InternalError } from '../core/errors.ts';
import { refIndexPartitions } from '../core/keys.ts';
import type { Item, ItemStore, Page } from '../store/item-store.ts';
import { scanParallelism } from '../store/scan-options.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId } from '../system/ref-index.ts';
import { storedPins } from './pins.ts';
import { type CachedStart, commitCache, dropCache, type ScanCacheOptions, saveCache, startFromCache } from './scan-cache.ts';
import { expandKnown, markFresh, markNew, referencedBad, unknownReferenced } from './scan-closure.ts';
import { checkRecorded, diffListing, entriesOfNew, ListingOutOfOrder, prepareCached } from './scan-diff.ts';
import { KEY_PREFIXES, noteBackup, noteInFlightVersions, noteItem, releasesReferences } from './scan-items.ts';
import {
  flushEntries,
  inParallel,
  listObjects,
  type Progress,
  READ_CONCURRENCY,
  readAndIndex,
  readIndex,
  readUnindexed,
  scanCold,
} from './scan-objects.ts';
import { addNamedSince } from './scan-refresh.ts';
import type { ReferenceScan, ScannedObject, ScanStats } from './scan-result.ts';
import { prefixEnd, Workset } from './scan-workset.ts';

export { NOT_REFERENCES, stringsIn } from './scan-items.ts';
export type { ReferenceScan, ScannedObject, ScanStats } from './scan-result.ts';

/** Immutable digest files: the only retention candidates (seed 004; docs/design.md §6 "retention quarantine"). */
export const CANDIDATE_PREFIXES = ['artifacts/', 'executions/', 'archive/'] as const;
const PROGRESS_MS = 500;

export interface ScanProgress {
  phase: string;
  done: number;
  total?: number;
}

export interface ScanOptions {
  pins?: Iterable<string>;
  /** Digests already known for unreferenced objects (observations), so they need not be re-read. */
  knownDigests?: ((key: string) => string | undefined) | Map<string, string>;
  /** Called at most every ~500 ms while the scan works (and once per phase at its end). */
  onProgress?: (p: ScanProgress) => void;
  /** Concurrent segments of the item pass (default: the store's scanSegments, ItemStore.scanParallelism). */
  segments?: number;
  /** Start from (and keep) the item references of the last scan (the retention plan's, scan-cache.ts). */
  cache?: ScanCacheOptions;
}

/** The item-store methods of issue 17's contract (segmented scan, change mark), where the engine has them. */
interface ScanningStore {
  scan(opts: { cursor?: string; limit?: number; segment?: number; totalSegments?: number }): Promise<Page>;
  changeMark?(): Promise<string>;
  scanChangedSince?(mark: string, opts?: { cursor?: string; limit?: number }): Promise<Page>;
}

function throttled(onProgress: ScanOptions['onProgress']): Progress {
  let last = 0;
  return (phase, done, total) => {
    if (!onProgress) return;
    const now = performance.now();
    if (now - last < PROGRESS_MS) return;
    last = now;
    onProgress({ phase, done, ...(total !== undefined ? { total } : {}) });
  };
}

/** Folds pages of items into the working set; backup records are read after their page's transaction. */
async function foldPages(
  ws: Workset,
  next: (cursor?: string) => Promise<Page>,
  now: number,
  seen: (n: number) => void,
  heads?: string[],
): Promise<void> {
  let cursor: string | undefined;
  do {
    const page = await next(cursor);
    const backups: Item[] = [];
    ws.tx(() => {
      for (const item of page.items) {
        if (noteItem(ws, item, now)) backups.push(item);
        if (heads && (item.type === 'head' || item.type === 'version')) heads.push(item.artifact_id as string);
      }
    });
    for (const b of backups) await noteBackup(ws, b);
    seen(page.items.length);
    cursor = page.cursor;
    // An engine answering from memory (SQLite) resolves in a microtask: without a turn of the event
    // loop per page, the listing beside this pass (listObjects) would wait for the whole item pass.
    await yieldToLoop();
  } while (cursor);
}

async function itemPass(ctx: ServiceContext, ws: Workset, segments: number, stats: ScanStats, progress: Progress): Promise<void> {
  const items = ctx.items as ItemStore & ScanningStore;
  const now = ctx.clock.now().getTime();
  // Segments need issue 17's contract; an engine without it is scanned as one segment.
  const total = typeof items.changeMark === 'function' ? Math.max(1, Math.floor(segments)) : 1;
  const seen = (n: number) => {
    stats.items += n;
    progress('items', stats.items);
  };
  await inParallel(
    Array.from({ length: total }, (_, i) => i),
    total,
    (segment) =>
      foldPages(
        ws,
        (cursor) => items.scan({ ...(cursor ? { cursor } : {}), ...(total > 1 ? { segment, totalSegments: total } : {}) }),
        now,
        seen,
      ),
  );
  ws.resolveStaged();
  ws.itemPassDone = true;
  checkRecorded(ws, false);
  noteInFlightVersions(ws, now);
}

/** Marks, reads and expands until nothing new is referenced. Fails closed on a referenced bad object. */
async function closure(ctx: ServiceContext, ws: Workset, stats: ScanStats, progress: Progress): Promise<void> {
  markNew(ws);
  for (let round = 1; ; round++) {
    markFresh(ws);
    const unknown = unknownReferenced(ws, 1000);
    if (unknown.length > 0) {
      for (const row of unknown) {
        const failed = ws.failures.get(row.key);
        if (failed) throw failed;
      }
      await inParallel(unknown, READ_CONCURRENCY, (row) =>
        row.cold ? scanCold(ctx, ws, stats, row) : readAndIndex(ctx, ws, stats, row.key),
      );
      continue;
    }
    progress('closure', round);
    if (expandKnown(ws) === 0) break;
  }
  const bad = referencedBad(ws);
  if (bad) {
    // A short or damaged read would hide the references in the bytes it missed: such a scan cannot be
    // trusted to protect what those bytes name, so it fails closed instead of letting a purge proceed.
    throw new IntegrityError(
      `the reference scan read ${bad.key} as ${String(bad.digest)} (${bad.size} bytes), but the items record ${bad.bad}: the references inside it cannot be trusted; nothing is collected until \`alp reconcile\` verifies it`,
      { key: bad.key, expected: bad.bad, actual: bad.digest },
    );
  }
}

function knownFn(k: ScanOptions['knownDigests']): ((key: string) => string | undefined) | undefined {
  if (k instanceof Map) return (key) => k.get(key);
  return k;
}

export async function scanReferences(ctx: ServiceContext, opts: ScanOptions = {}): Promise<ReferenceScan> {
  const started = Date.now();
  const items = ctx.items as ItemStore & ScanningStore;
  // Taken before anything is read: every write that commits after it is in scanChangedSince(mark).
  const mark = typeof items.changeMark === 'function' ? await items.changeMark() : 'full';
  const cache = opts.cache && mark !== 'full' ? opts.cache : undefined;
  const now = ctx.clock.now().getTime();
  const start = cache ? await startFromCache(ctx.items, cache, now) : undefined;
  try {
    return await scanFrom(ctx, opts, { mark, cache, start, started });
  } catch (e) {
    if (!(e instanceof ListingOutOfOrder)) throw e;
    // An engine whose listing cannot be merged with the cache (its order is not the keys' UTF-8 order).
    return scanFrom(ctx, opts, { mark, cache, start: undefined, started });
  }
}

interface ScanStart {
  mark: string;
  cache: ScanCacheOptions | undefined;
  start: CachedStart | undefined;
  started: number;
}

/** A whole scan, or one from the cache (the changes since its mark folded in, the listing merged with its rows). */
async function scanFrom(ctx: ServiceContext, opts: ScanOptions, { mark, cache, start, started }: ScanStart): Promise<ReferenceScan> {
  const stats: ScanStats = { items: 0, objects: 0, objectsRead: 0, bytesRead: 0, indexed: 0, indexedNow: 0, coldTrusted: 0, ms: 0 };
  const progress = throttled(opts.onProgress);
  const now = ctx.clock.now().getTime();
  const partitions = new Set(refIndexPartitions(contentRootId(ctx.content.location), ctx.layout.index_shards));
  let cached = start;
  if (cached && !(await foldChanges(ctx, cached.ws, cached.mark, partitions, stats, progress))) {
    cached.ws.close();
    cached = undefined;
    stats.items = 0;
  }
  const ws = cached?.ws ?? new Workset();
  ws.entryPartitions = partitions;
  if (cached) stats.fromCache = true;
  let saved: string | undefined;
  try {
    if (cached) {
      stats.objects = await diffListing(ctx, ws, KEY_PREFIXES, progress);
      await entriesOfNew(ctx, ws);
    } else {
      await Promise.all([
        itemPass(ctx, ws, opts.segments ?? scanParallelism(ctx.items), stats, progress),
        listObjects(ctx, ws, KEY_PREFIXES, progress).then((n) => {
          stats.objects = n;
        }),
      ]);
    }
    await readIndex(ctx, ws, stats);
    await readUnindexed(ctx, ws, stats, knownFn(opts.knownDigests), progress);
    await closure(ctx, ws, stats, progress);
    await flushEntries(ctx, ws, stats);
    // Saved before any pin is applied: pins are the caller's and the installation's of this scan only.
    if (cache) saved = saveCache(ws, cache, { mark, builtAt: cached?.builtAt ?? now });
    // The installation's stored pins (alp pins) are pins of every scan, whoever called it (B8): strict,
    // so they keep an archived original too, not only its listed copy (B13).
    const stored = await storedPins(ctx.items);
    ws.tx(() => {
      for (const p of opts.pins ?? []) ws.digest(p, 'pinned by the host', true);
      for (const p of stored) ws.digest(p, 'pinned in the installation (alp pins)', true);
    });
    await closure(ctx, ws, stats, progress);
    await flushEntries(ctx, ws, stats);
  } catch (e) {
    ws.close();
    dropCache(saved);
    throw e;
  }
  if (saved && cache) commitCache(saved, cache);
  stats.ms = Date.now() - started;
  opts.onProgress?.({ phase: 'done', done: stats.objects, total: stats.objects });
  return resultOf(ws, stats, mark);
}

/**
 * Folds the items changed since a cached scan's mark into its working set (entries aside: they are
 * read whole, readEntries). False when one of them may release references: the cache is not used.
 */
async function foldChanges(
  ctx: ServiceContext,
  ws: Workset,
  since: string,
  partitions: Set<string>,
  stats: ScanStats,
  progress: Progress,
): Promise<boolean> {
  const items = ctx.items as ItemStore & ScanningStore;
  if (typeof items.scanChangedSince !== 'function') return false;
  const released = new Error('released');
  prepareCached(ws);
  ws.entryPartitions = partitions;
  ws.itemPassDone = true;
  ws.entryDropsRow = true;
  try {
    await foldPages(
      ws,
      async (cursor) => {
        const page = await items.scanChangedSince?.(since, cursor ? { cursor } : {});
        if (!page || page.items.some(releasesReferences)) throw released;
        // An observation that changed (a purge prepared, done, reset): its object's row is listed again.
        ws.tx(() => {
          for (const i of page.items) if (i.type === 'retention_observation' && typeof i.key === 'string') ws.invalidate(i.key);
        });
        return page;
      },
      ctx.clock.now().getTime(),
      (n) => {
        stats.items += n;
        progress('changes', stats.items);
      },
    );
  } catch (e) {
    if (e === released) return false;
    throw e;
  } finally {
    ws.entryDropsRow = false;
  }
  ws.resolveStaged();
  noteInFlightVersions(ws, ctx.clock.now().getTime());
  checkRecorded(ws, true);
  return true;
}

function resultOf(ws: Workset, stats: ScanStats, mark: string): ReferenceScan & { readonly workset: Workset } {
  return {
    stats,
    mark,
    workset: ws,
    referencedWhy: (key) => ws.whyKey(key),
    digestWhy: (digest, forKey) => ws.whyDigest(digest, forKey),
    object: (key) => {
      const row = ws.row(key);
      if (!row) return undefined;
      return {
        key: row.key,
        size: row.size,
        storageClass: (row.cls ?? 'STANDARD') as ScannedObject['storageClass'],
        ...(row.digest ? { digest: row.digest } : {}),
      };
    },
    keysWithDigest: (digest) => ws.keysWithDigest(digest),
    candidates: () => candidates(ws),
    referencedCount: () => ws.db.prepare('SELECT COUNT(*) FROM objects WHERE why IS NOT NULL').pluck().get() as number,
    close: () => ws.close(),
  };
}

/** Unreferenced objects under CANDIDATE_PREFIXES in key order, a page at a time (no statement stays open). */
function* candidates(ws: Workset): Iterable<ScannedObject> {
  // One lower bound per query (with two, SQLite starts each page's range at the prefix: quadratic).
  const cols = 'SELECT key, size, cls, digest FROM objects WHERE why IS NULL';
  const first = ws.db.prepare(`${cols} AND key >= ? AND key < ? ORDER BY key LIMIT 500`);
  const page = ws.db.prepare(`${cols} AND key > ? AND key < ? ORDER BY key LIMIT 500`);
  for (const prefix of [...CANDIDATE_PREFIXES].sort()) {
    for (let after: string | undefined; ; ) {
      const rows = (after === undefined ? first : page).all(after ?? prefix, prefixEnd(prefix)) as Array<{
        key: string;
        size: number;
        cls: string | null;
        digest: string | null;
      }>;
      if (rows.length === 0) break;
      for (const r of rows)
        yield {
          key: r.key,
          size: r.size,
          storageClass: (r.cls ?? 'STANDARD') as ScannedObject['storageClass'],
          ...(r.digest ? { digest: r.digest } : {}),
        };
      after = (rows[rows.length - 1] as { key: string }).key;
    }
  }
}

/**
 * The short fence's re-validation (issue 17 item 3): folds every item written since `scan.mark`
 * (ItemStore.scanChangedSince) into the scan's working set — keys, in-flight reservations, digests,
 * backups — adds the objects they name that the listing did not have (their index entry, else their
 * bytes), adds `pins`, and extends the closure. Afterwards referencedWhy / digestWhy answer for the
 * state at the fence. O(changes): only changed items are read, only fresh references are applied. An
 * engine without the change feed is rescanned whole (conservative).
 */
export async function refreshReferences(
  ctx: ServiceContext,
  scan: ReferenceScan,
  opts: { pins?: Iterable<string> } = {},
): Promise<{ changed: number; ms: number }> {
  const started = Date.now();
  const ws = (scan as { workset?: Workset }).workset;
  if (!ws) throw new InternalError('refreshReferences needs a scan made by scanReferences');
  const items = ctx.items as ItemStore & ScanningStore;
  const now = ctx.clock.now().getTime();
  const stats = scan.stats;
  let changed = 0;
  const heads: string[] = [];
  const incremental = typeof items.scanChangedSince === 'function' && typeof items.changeMark === 'function' && scan.mark !== 'full';
  // Taken before anything is read: a change after it is folded again by the next refresh (folding is idempotent).
  const next = incremental ? await (items.changeMark as () => Promise<string>)() : scan.mark;
  const from = scan.mark;
  const since = (cursor?: string) =>
    incremental ? items.scanChangedSince(from, cursor ? { cursor } : {}) : items.scan(cursor ? { cursor } : {});
  await foldPages(
    ws,
    since,
    now,
    (n) => {
      changed += n;
    },
    heads,
  );
  ws.resolveStaged();
  noteInFlightVersions(ws, now, heads);
  const stored = await storedPins(ctx.items);
  ws.tx(() => {
    for (const p of opts.pins ?? []) ws.digest(p, 'pinned by the host', true);
    for (const p of stored) ws.digest(p, 'pinned in the installation (alp pins)', true);
  });
  await addNamedSince(ctx, ws, stats);
  await closure(ctx, ws, stats, () => {});
  await flushEntries(ctx, ws, stats);
  scan.mark = next;
  stats.refreshed = changed;
  return { changed, ms: Date.now() - started };
}
