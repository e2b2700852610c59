/**
 * The reference scan as a run uses it: `planScan` before the fence, `refreshScan` under it (every item
 * changed since the scan's mark folded in: references.ts refreshReferences, O(changes)).
 */
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

/** Folds every change since `scan.mark` into `scan` (under the fence). */
export async function refreshScan(ctx: ServiceContext, scan: ReferenceScan, opts: { pins: Iterable<string> }): Promise<void> {
  await refreshReferences(ctx, scan, { pins: opts.pins });
}
