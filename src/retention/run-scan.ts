/**
 * The reference scan as a run uses it: `planScan` and a first `refreshScan` before the fence, a second
 * `refreshScan` under it (every item changed since the previous one folded in: references.ts
 * refreshReferences, O(changes)).
 */
import type { ItemStore } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { refreshReferences, scanReferences } from './references.ts';
import type { ScanCacheOptions } from './scan-cache.ts';
import type { ReferenceScan } from './scan-result.ts';

export interface PlanScanOptions {
  pins: Iterable<string>;
  /** The digest an observation recorded for an unreferenced object (not re-read when not indexed). */
  knownDigest?: (key: string) => string | undefined;
  onProgress?: (phase: string, done: number, total?: number) => void;
  /** The plan's reference cache (scan-cache.ts), when caching is on. */
  cache?: ScanCacheOptions;
}

export async function planScan(ctx: ServiceContext, opts: PlanScanOptions): Promise<ReferenceScan> {
  const progress = opts.onProgress;
  return scanReferences(ctx, {
    pins: opts.pins,
    ...(opts.cache ? { cache: opts.cache } : {}),
    ...(opts.knownDigest ? { knownDigests: opts.knownDigest } : {}),
    ...(progress ? { onProgress: (p: { phase: string; done: number; total?: number }) => progress(p.phase, p.done, p.total) } : {}),
  });
}

/** Folds every change since `scan.mark` into `scan`, and moves the mark to where this fold started. */
export async function refreshScan(ctx: ServiceContext, scan: ReferenceScan, opts: { pins: Iterable<string> }): Promise<void> {
  await refreshReferences(ctx, scan, { pins: opts.pins });
}

/**
 * The refresh before the fence: folds what changed since the plan — whatever that costs (a backfilling
 * plan's own index entries may be more than the change log answers, then it reads the whole table) — so
 * that the refresh under the fence reads only what changes after. Only where a store can answer that
 * from a log at all (SQLite): one whose every change read is the whole table (DynamoDB, for now) would
 * pay it twice, so it is left to the fence there.
 */
export async function refreshBeforeFence(ctx: ServiceContext, scan: ReferenceScan, opts: { pins: Iterable<string> }): Promise<void> {
  const items = ctx.items as ItemStore & { changeMark?(): Promise<string> };
  if (typeof items.changeMark !== 'function' || typeof items.changesAnswerable !== 'function') return;
  if (!(await items.changesAnswerable(await items.changeMark()))) return;
  await refreshReferences(ctx, scan, opts);
}
