/**
 * Writing a fresh key in place (docs/design.md §6, "Fresh keys are written in place"): which stages
 * may, and the checks a publish makes of its files whichever way they were written.
 */
import { constants as C } from 'node:fs';
import { IntegrityError } from '../../core/errors.ts';
import { type Body, isCreateOnlyKey, knownBodySize, type PutOptions, type StagedObject } from '../content-store.ts';

/**
 * A fresh key is written in place only up to this size: a bigger object is staged aside, so that an
 * upload interrupted by a crash leaves a temp file the next start removes rather than an orphan at its
 * key that only retention reclaims (and one fsync round saved matters only for small objects).
 */
const IN_PLACE_MAX_BYTES = 1 << 20;
export const CREATE_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW;

/** Whether a stage may write at the key itself: a fresh create-only key, not a repair, known to be small. */
export function writesInPlace(key: string, body: Body, opts: PutOptions): boolean {
  if (opts.fresh !== true || opts.repair === true || !isCreateOnlyKey(key)) return false;
  return (knownBodySize(body, opts) ?? Number.POSITIVE_INFINITY) <= IN_PLACE_MAX_BYTES;
}

export function checkWhole(staged: StagedObject, onDisk: number): void {
  if (onDisk !== staged.size)
    throw new IntegrityError(`torn write: ${staged.key} holds ${onDisk} bytes on disk, ${staged.size} were written`, { key: staged.key });
}

/** Waits for every promise; then rejects with the first failure, if any. */
export async function settleAll(work: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(work)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
