/**
 * The object side of the reference scan: the listing (prefixes listed concurrently), the reference
 * index read instead of the bytes (system/ref-index.ts), and the reads of what the index cannot answer
 * — each of which writes the object's entry (the resumable backfill: an interrupted scan keeps every
 * entry it wrote). An entry is used only when it is well-formed, not overflow, its size is the
 * listing's and its digest the one the items record (when they record one); otherwise the bytes are
 * read and scanned, never assumed clean (seed 004).
 */
import { coldDigest, isColdError } from '../content/cold.ts';
import type { ObjectInfo } from '../content/content-store.ts';
import { DigestAccumulator } from '../core/digest.ts';
import { IntegrityError, InternalError, InvalidInput, NotFound } from '../core/errors.ts';
import { HISTORY_SEGMENT_PREFIX } from '../core/object-keys.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId, MAX_INDEXED_DIGESTS, type RefIndexEntry, refIndexItem } from '../system/ref-index.ts';
import { scanForDigests } from './digest-scan.ts';
import { innerOf, readableTwin } from './scan-closure.ts';
import type { ScanStats } from './scan-result.ts';
import type { ObjectRow, Workset } from './scan-workset.ts';

/** Object reads overlap: each is a handful of filesystem or HTTP round trips. */
export const READ_CONCURRENCY = 16;
const BATCH = 1000;

export type Progress = (phase: string, done: number, total?: number) => void;

export async function inParallel<T>(list: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < list.length) await fn(list[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(n, list.length) }, worker));
}

/** Whether a listed object is in a cold storage class (its bytes cannot be read without a restore). */
export function listedCold(ctx: ServiceContext, o: ObjectInfo): boolean {
  return ctx.content.hasStorageClasses && o.storageClass === 'GLACIER';
}

/** Lists every prefix concurrently into the working set, a page at a time. */
export async function listObjects(ctx: ServiceContext, ws: Workset, prefixes: readonly string[], progress: Progress): Promise<number> {
  let count = 0;
  await inParallel(prefixes, prefixes.length, async (prefix) => {
    let batch: ObjectInfo[] = [];
    const flush = () => {
      const b = batch;
      batch = [];
      ws.tx(() => {
        for (const o of b) ws.addObject(o, listedCold(ctx, o));
      });
      count += b.length;
      progress('list', count);
    };
    for await (const o of ctx.content.list(prefix)) {
      batch.push(o);
      if (batch.length >= BATCH) flush();
    }
    flush();
  });
  return count;
}

/** Whether an entry answers for the listed object (see the module comment). */
export function usable(e: RefIndexEntry, row: { size: number }, recorded: string | undefined): boolean {
  return (
    e.overflow !== true &&
    e.digests.length <= MAX_INDEXED_DIGESTS &&
    e.size === row.size &&
    (recorded === undefined || recorded === e.digest)
  );
}

/**
 * The reference index, as the item pass gathered it (scan-items.ts: the content root's entries): each
 * usable entry gives its object's digest and inner digests without a read. A cold object's entry is
 * used only when S3's checksum is the entry's digest.
 */
export async function readIndex(ctx: ServiceContext, ws: Workset, stats: ScanStats): Promise<void> {
  stats.indexed += ws.tx(() => ws.applyEntries());
  for (let after = ''; ; ) {
    const page = ws.coldWithEntries(after, BATCH);
    if (page.length === 0) break;
    after = (page[page.length - 1] as { key: string }).key;
    await inParallel(page, READ_CONCURRENCY, async ({ key, digest }) => {
      const sum = await coldDigest(ctx.content, key);
      stats.coldTrusted++;
      if (sum === undefined) return ws.tx(() => ws.keep(key, 'cold, without an S3 checksum: digest unknown unread'));
      ws.tx(() => ws.coldKnown(key, sum, sum === digest));
      if (sum === digest) stats.indexed++;
    });
  }
}

/**
 * Every listed object the index did not answer: its digest from an observation (`knownDigests`: read
 * only if it turns out referenced), from S3's checksum (cold), or from its bytes, read, scanned and
 * indexed. Bytes that do not hash to the recorded digest are marked bad (the scan fails if they are
 * referenced).
 */
export async function readUnindexed(
  ctx: ServiceContext,
  ws: Workset,
  stats: ScanStats,
  known: ((key: string) => string | undefined) | undefined,
  progress: Progress,
): Promise<void> {
  const total = ws.db.prepare('SELECT COUNT(*) FROM objects WHERE inner = 0 AND digest IS NULL').pluck().get() as number;
  const next = ws.db.prepare(
    'SELECT key, size, cls, cold, digest, inner, bad FROM objects WHERE inner = 0 AND digest IS NULL AND key > ? ORDER BY key LIMIT ?',
  );
  let after = '';
  let done = 0;
  for (;;) {
    const rows = next.all(after, BATCH) as ObjectRow[];
    if (rows.length === 0) break;
    after = (rows[rows.length - 1] as ObjectRow).key;
    await inParallel(rows, READ_CONCURRENCY, async (row) => {
      const digest = known?.(row.key);
      if (digest) ws.known(row.key, digest);
      else if (row.cold) await noteCold(ctx, ws, stats, row.key);
      else await readAndIndex(ctx, ws, stats, row.key);
      progress('read', ++done, total);
    });
  }
}

async function noteCold(ctx: ServiceContext, ws: Workset, stats: ScanStats, key: string): Promise<void> {
  const sum = await coldDigest(ctx.content, key);
  stats.coldTrusted++;
  // Without a checksum it cannot be matched: kept (never a candidate) rather than assumed unreferenced,
  // and not scanned (what it names is protected only by referenced bytes).
  if (sum === undefined) ws.keep(key, 'cold, without an S3 checksum: digest unknown unread');
  else ws.known(key, sum, undefined, true);
}

/** Reads, hashes and scans one object; writes its entry. A read refused as cold takes the cold path. */
export async function readAndIndex(ctx: ServiceContext, ws: Workset, stats: ScanStats, key: string): Promise<void> {
  let bytes: AsyncIterable<Uint8Array>;
  try {
    bytes = await ctx.content.readRaw(key);
  } catch (e) {
    if (e instanceof NotFound) throw new InternalError(`object ${key} vanished during the reference scan; is maintenance fenced?`);
    if (isColdError(e)) return noteCold(ctx, ws, stats, key);
    throw e;
  }
  const acc = new DigestAccumulator();
  const hashing = async function* (src: AsyncIterable<Uint8Array>) {
    for await (const c of src) {
      acc.update(c);
      yield c;
    }
  };
  let found: Set<string>;
  try {
    found = await scanForDigests(hashing(bytes), undefined, `object ${key}`, key.startsWith(HISTORY_SEGMENT_PREFIX));
  } catch (e) {
    if (!(e instanceof InvalidInput || e instanceof IntegrityError)) throw e;
    (bytes as { destroy?: () => void }).destroy?.();
    return unscannable(ctx, ws, stats, key, e);
  }
  stats.objectsRead++;
  stats.bytesRead += acc.size;
  const digest = acc.digest();
  const expected = ws.recordedOf(key);
  ws.tx(() => {
    ws.known(key, digest, found);
    if (expected !== undefined && expected !== digest) ws.bad(key, expected);
  });
  const overflow = found.size > MAX_INDEXED_DIGESTS;
  const entry: RefIndexEntry = {
    key,
    digest,
    size: acc.size,
    digests: overflow ? [] : [...found].sort(),
    ...(overflow ? { overflow: true } : {}),
    indexed_at: ctx.clock.now().toISOString(),
  };
  await queueEntry(ctx, ws, stats, entry);
}

const ENTRY_BATCH = 200;

/** Entries are written in batches (one transaction each on SQLite, BatchWriteItem on DynamoDB). */
async function queueEntry(ctx: ServiceContext, ws: Workset, stats: ScanStats, entry: RefIndexEntry): Promise<void> {
  ws.pendingEntries.push(entry);
  if (ws.pendingEntries.length >= ENTRY_BATCH) await flushEntries(ctx, ws, stats);
}

/** The backfill: a failed entry write only means the object is read again next time. */
export async function flushEntries(ctx: ServiceContext, ws: Workset, stats: ScanStats): Promise<void> {
  const batch = ws.pendingEntries.splice(0);
  if (batch.length === 0) return;
  const root = contentRootId(ctx.content.location);
  const written = await ctx.items.batchPut(batch.map((e) => refIndexItem(root, ctx.layout.index_shards, e))).then(
    () => true,
    () => false,
  );
  if (written) stats.indexedNow += batch.length;
}

/**
 * Bytes whose references cannot be read (a compression bomb, a history segment that is not gzip): the
 * error stands for the object and fails the scan only if the object is referenced (the closure throws
 * it); unreferenced, it is matched by its digest like any other (hashed in a second, plain read).
 */
async function unscannable(ctx: ServiceContext, ws: Workset, stats: ScanStats, key: string, e: Error): Promise<void> {
  const acc = new DigestAccumulator();
  for await (const c of await ctx.content.readRaw(key)) acc.update(c);
  stats.objectsRead++;
  stats.bytesRead += acc.size;
  ws.fail(key, e);
  ws.tx(() => ws.known(key, acc.digest()));
}

/**
 * A referenced COLD object (an archive copy in GLACIER) without a usable entry is not read. Seed
 * 004's rule stands (bytes that must be scanned and cannot be read are never assumed clean): its
 * references are those of a readable listed object with the same digest (its original), provided
 * S3's checksum is its recorded digest. Then its entry is written from the twin's (the backfill of a
 * copy, so that it answers once the original is reclaimed). Otherwise the scan fails closed.
 */
export async function scanCold(ctx: ServiceContext, ws: Workset, stats: ScanStats, row: ObjectRow): Promise<void> {
  const expected = ws.recordedOf(row.key);
  const digest = row.digest ?? undefined;
  const twin = expected !== undefined && digest === expected ? readableTwin(ws, expected) : undefined;
  if (expected === undefined || digest !== expected || twin === undefined) {
    throw new IntegrityError(
      `${row.key} is in a cold storage class and cannot be read to scan its references, and ${digest === undefined ? 'S3 has no checksum for it' : digest !== expected ? `S3's checksum ${digest} is not its recorded digest ${String(expected)}` : 'it has no reference-index entry and no readable original with its digest exists'}: nothing is collected until it is restored (aws s3api restore-object) or \`alp reconcile\` explains it`,
      { key: row.key, expected, actual: digest },
    );
  }
  const inner = innerOf(ws, twin);
  ws.tx(() => ws.known(row.key, digest, inner, true));
  await queueEntry(ctx, ws, stats, { key: row.key, digest, size: row.size, digests: inner, indexed_at: ctx.clock.now().toISOString() });
}
