/**
 * `alp audit checkpoint` (issue 20 item 2): the log's signed checkpoint, up to date. Takes the lease
 * and runs rounds until nothing is pending, then gives the lease up. When another process holds it
 * (a running `alp serve` sequences every interval), the checkpoint it last committed is answered
 * instead. NOT_FOUND (NO_SIGNING_KEY) when the installation has no key: a checkpoint is a signature.
 */
import { NotFound } from '../../core/errors.ts';
import type { ServiceContext } from '../../system/context.ts';
import { installationSigner } from '../../system/installation-key.ts';
import { acquireLease, defaultHolder, releaseLease } from './lease.ts';
import { runRound } from './sequencer.ts';
import { readLogState } from './state.ts';

export interface CheckpointNow {
  checkpoint: string;
  size: number;
  /** Whether this process sequenced (false: another holder has the lease; its last checkpoint). */
  sequenced: boolean;
}

export async function checkpointNow(ctx: ServiceContext): Promise<CheckpointNow> {
  await installationSigner(ctx);
  const lease = await acquireLease(ctx, defaultHolder());
  if (lease) {
    try {
      let r = await runRound(ctx, lease);
      while (r.appended > 0) r = await runRound(ctx, lease);
      if (r.checkpoint) return { checkpoint: r.checkpoint, size: r.size, sequenced: true };
    } finally {
      await releaseLease(ctx, lease);
    }
  }
  const state = await readLogState(ctx);
  if (!state.checkpoint)
    throw new NotFound('the transparency log has no signed checkpoint yet: the process holding its lease has not signed one', {
      reason: 'NO_CHECKPOINT',
    });
  return { checkpoint: state.checkpoint, size: state.size, sequenced: false };
}
