/**
 * The transparency log's committed state, `TLOG` / `STATE` {size, root, batch_start, checkpoint}: the
 * tree the log publishes (its tiles and bundles are in the content store, objects.ts), the start of
 * the last committed batch (whose markers a round finishes marking first) and the signed checkpoint
 * of that size, when the installation has a key.
 */
import type { Digest } from '../../core/digest.ts';
import { InvalidInput } from '../../core/errors.ts';
import type { ServiceContext } from '../../system/context.ts';
import { STATE_KEY } from './lease.ts';
import { EMPTY_ROOT, type Hash } from './merkle.ts';

export interface LogState {
  size: number;
  root: Hash;
  /** Leaf index of the last committed batch's first leaf (its manifest: objects.ts manifestKey). */
  batchStart?: number;
  /** The signed checkpoint note of `size`, when signed. */
  checkpoint?: string;
  /** Whether the STATE item exists (size 0 without it). */
  exists: boolean;
}

export async function readLogState(ctx: Pick<ServiceContext, 'items'>): Promise<LogState> {
  const item = await ctx.items.get(STATE_KEY, { consistent: true });
  if (!item) return { size: 0, root: EMPTY_ROOT, exists: false };
  if (typeof item.size !== 'number' || typeof item.root !== 'string')
    throw new InvalidInput('the transparency log STATE item is malformed', { key: STATE_KEY });
  return {
    size: item.size,
    root: Buffer.from(item.root, 'base64'),
    ...(typeof item.batch_start === 'number' ? { batchStart: item.batch_start } : {}),
    ...(typeof item.checkpoint === 'string' ? { checkpoint: item.checkpoint } : {}),
    exists: true,
  };
}

/**
 * One run of a chain's entries in a batch: entries first_seq … last_seq at leaves leaf_start …. In the
 * current format (`/2`) `pending` lists the pending markers (first_seq, last_seq) the run's locators
 * replace; a first-format manifest (`/1`) has one run per marker, marked in place.
 */
export interface BatchRun {
  artifact_id: string;
  first_seq: number;
  last_seq: number;
  leaf_start: number;
  hashes: Digest[];
  pending?: Array<[number, number]>;
  timestamp?: string;
}

export const MANIFEST_FORMAT = 'alp-tlog-batch/2';
export const LEGACY_MANIFEST_FORMAT = 'alp-tlog-batch/1';

/** One sequenced batch: which entries got which leaves (the manifest, `tlog/batches/<start>.json`). */
export interface BatchManifest {
  format: typeof MANIFEST_FORMAT | typeof LEGACY_MANIFEST_FORMAT;
  start: number;
  markers: BatchRun[];
}

export function parseManifest(bytes: Buffer, start: number): BatchManifest {
  const m = JSON.parse(bytes.toString('utf8')) as BatchManifest;
  if ((m?.format !== MANIFEST_FORMAT && m?.format !== LEGACY_MANIFEST_FORMAT) || m.start !== start || !Array.isArray(m.markers))
    throw new InvalidInput(`the transparency log's batch manifest at ${start} is malformed`);
  return m;
}

/** Leaves of a manifest, in order: one per entry. */
export function manifestLeaves(m: BatchManifest): Array<{ artifact_id: string; seq: number; hash: Digest }> {
  return m.markers.flatMap((mk) => mk.hashes.map((hash, i) => ({ artifact_id: mk.artifact_id, seq: mk.first_seq + i, hash })));
}
