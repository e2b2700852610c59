/**
 * The objects a refresh (references.ts refreshReferences) adds to the working set: objects named by
 * keys or in-flight prefixes that changed items brought, which the listing did not have (written after
 * it). Each is looked up (head, or a listing of the prefix), then answered by its index entry when it
 * is usable, else read, scanned and indexed — as in the scan itself. O(what changed).
 */
import { coldDigest } from '../content/cold.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId, getRefIndexEntries } from '../system/ref-index.ts';
import { KEY_PREFIXES } from './scan-items.ts';
import { inParallel, listedCold, READ_CONCURRENCY, readAndIndex, usable } from './scan-objects.ts';
import type { ScanStats } from './scan-result.ts';
import type { ObjectRow, Workset } from './scan-workset.ts';

export async function addNamedSince(ctx: ServiceContext, ws: Workset, stats: ScanStats): Promise<void> {
  const keys = ws.db
    .prepare('SELECT k.key FROM keyrefs k WHERE k.fresh = 1 AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.key = k.key)')
    .pluck()
    .all() as string[];
  await inParallel(
    keys.filter((k) => KEY_PREFIXES.some((p) => k.startsWith(p))),
    READ_CONCURRENCY,
    async (key) => {
      const info = await ctx.content.head(key);
      if (info) ws.tx(() => ws.addObject(info, listedCold(ctx, info)));
    },
  );
  const prefixes = ws.db.prepare('SELECT prefix FROM prefixes WHERE fresh = 1').pluck().all() as string[];
  for (const prefix of prefixes) {
    for await (const o of ctx.content.list(prefix)) ws.tx(() => ws.addObject(o, listedCold(ctx, o)));
  }
  const rows = ws.db
    .prepare('SELECT key, size, cls, cold, digest, inner, bad FROM objects WHERE inner = 0 AND digest IS NULL')
    .all() as ObjectRow[];
  stats.objects += rows.length;
  const entries = await getRefIndexEntries(
    ctx.items,
    contentRootId(ctx.content.location),
    ctx.layout.index_shards,
    rows.map((r) => r.key),
  );
  await inParallel(rows, READ_CONCURRENCY, async (row) => {
    const e = entries.get(row.key);
    const recorded = ws.recordedOf(row.key);
    const ok = e !== undefined && usable(e, row, recorded);
    if (e && ok && !row.cold) {
      ws.tx(() => ws.known(row.key, e.digest, e.digests));
      stats.indexed++;
    } else if (row.cold) {
      const sum = await coldDigest(ctx.content, row.key);
      stats.coldTrusted++;
      if (sum === undefined) ws.tx(() => ws.keep(row.key, 'cold, without an S3 checksum: digest unknown unread'));
      else ws.tx(() => ws.known(row.key, sum, e && ok && sum === e.digest ? e.digests : undefined, true));
    } else await readAndIndex(ctx, ws, stats, row.key);
  });
}
