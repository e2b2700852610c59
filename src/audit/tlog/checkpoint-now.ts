import type { ServiceContext } from '../../system/context.ts';
import { installationSigner } from '../../system/installation-key.ts';
import { acquireLease, defaultHolder, releaseLease } from './lease.ts';
import { logCheckpoint } from './proofs.ts';
import { runRound } from './sequencer.ts';

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
  return { ...(await logCheckpoint(ctx)), sequenced: false };
}
