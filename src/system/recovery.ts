/**
 * Crash recovery of the maintenance fence. A maintenance that died keeps the fence (publishers stay
 * refused); an operator advances the epoch, then `alp maintenance release --epoch N` runs
 * `recoverMaintenance`: it takes the abandoned fence over in epoch N (the master, then every shard
 * re-stamped with the new token: a crash mid-acquisition or mid-release left some shards held and some
 * not), runs every recovery step under it, and releases it (every shard, then the master) only when
 * they all succeeded.
 *
 * Plug point: a service whose maintenance work can be interrupted half-way (the retention purge
 * journal: PREPARED records to review and retry; interrupted backups) is registered as a step on the
 * context by `runtime/context.ts` (`ctx.recoverySteps`, run in order).
 */
import { MaintenanceInProgress, StaleEpoch } from '../core/errors.ts';
import type { MaintenanceRecoveryStep, RecoveryOptions, ServiceContext } from './context.ts';
import { type FenceInfo, maintenanceStatus, readFence, withMaintenance } from './fence.ts';
import { readEpoch } from './state.ts';

export type { MaintenanceRecoveryStep, RecoveryOptions } from './context.ts';

export interface RecoveryResult {
  recovered: boolean;
  abandoned?: FenceInfo;
  steps: Array<{ name: string; result: Record<string, unknown> | undefined }>;
}

/**
 * Recovers an abandoned fence: refused with STALE_EPOCH when `epoch` is not the current epoch, and
 * with MAINTENANCE when the fence was taken in the current epoch (its holder may be alive: advance the
 * epoch first if it is not). A step that fails leaves the fence held (publishers stay out).
 */
export async function recoverMaintenance(
  ctx: ServiceContext,
  epoch: number,
  owner: string,
  steps?: MaintenanceRecoveryStep[],
  opts: RecoveryOptions = {},
): Promise<RecoveryResult> {
  const current = await readEpoch(ctx.items);
  if (epoch !== current) throw new StaleEpoch(epoch, current);
  const fence = await readFence(ctx);
  // Shards held without a master (no step of the protocol leaves that): recovered like an abandoned fence.
  if (!fence && (await maintenanceStatus(ctx)).state !== 'orphaned') return { recovered: false, steps: [] };
  if (fence && fence.epoch >= current) {
    throw new MaintenanceInProgress(
      `the fence is held in the current epoch ${fence.epoch} by ${fence.holder} (${fence.purpose}, pid ${fence.pid} on ${fence.host}, since ${fence.acquired_at}); ` +
        'if that maintenance is dead, run `alp epoch advance` first, then release with the new epoch',
      { holder: fence.holder, epoch: fence.epoch },
    );
  }
  const list = steps ?? ctx.recoverySteps;
  return withMaintenance(
    ctx,
    epoch,
    owner,
    async (m) => {
      const done: RecoveryResult['steps'] = [];
      for (const step of list) done.push({ name: step.name, result: await step.run(ctx, m, opts) });
      return { recovered: true, ...(fence ? { abandoned: fence } : {}), steps: done };
    },
    // Readers too: a recovery step may finish an interrupted purge (unlink bytes).
    { purpose: 'crash recovery', takeOverStale: true, holdOnFailure: true, fenceReaders: true },
  );
}
