/**
 * Crash recovery of the maintenance fence. A maintenance that died keeps the fence (publishers stay
 * refused); an operator advances the epoch, then `alp maintenance release --epoch N` runs
 * `recoverMaintenance`: it takes the abandoned fence over in epoch N, runs every recovery step under
 * it, and releases it only when they all succeeded.
 *
 * Plug point: a service whose maintenance work can be interrupted half-way (the retention purge
 * journal: PREPARED records to review and retry) adds its step to `maintenanceRecoverySteps`.
 */
import { MaintenanceInProgress, StaleEpoch } from '../core/errors.ts';
import type { ServiceContext } from '../lifecycle/context.ts';
import { type FenceInfo, type MaintenanceHandle, readFence, withMaintenance } from './maintenance.ts';
import { readEpoch } from './system.ts';

/** What the operator gives a recovery besides the epoch. */
export interface RecoveryOptions {
  /** Digests to keep: honoured by every step that could unlink content (with the pins it recorded). */
  pins?: string[];
}

export interface MaintenanceRecoveryStep {
  name: string;
  /** Runs under the taken-over fence; `m.abandoned` is the fence the crashed maintenance left. */
  run(ctx: ServiceContext, m: MaintenanceHandle, opts: RecoveryOptions): Promise<Record<string, unknown> | undefined>;
}

/**
 * The steps every recovery runs, in order: interrupted backups are settled (a fenced-scan backup that
 * died left the fence and a PENDING record), then the retention purge journal is reviewed and retried.
 */
export async function maintenanceRecoverySteps(): Promise<MaintenanceRecoveryStep[]> {
  const { recoverPreparedPurges } = await import('../retention/recovery-step.ts');
  const { settleInterruptedBackups } = await import('./backup.ts');
  return [
    { name: 'backups: settle interrupted backups', run: async (ctx) => ({ ...(await settleInterruptedBackups(ctx)) }) },
    { name: 'retention: review and retry interrupted purges', run: recoverPreparedPurges },
  ];
}

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
  if (!fence) return { recovered: false, steps: [] };
  if (fence.epoch >= current) {
    throw new MaintenanceInProgress(
      `the fence is held in the current epoch ${fence.epoch} by ${fence.holder} (${fence.purpose}, pid ${fence.pid} on ${fence.host}, since ${fence.acquired_at}); ` +
        'if that maintenance is dead, run `alp epoch advance` first, then release with the new epoch',
      { holder: fence.holder, epoch: fence.epoch },
    );
  }
  const list = steps ?? (await maintenanceRecoverySteps());
  return withMaintenance(
    ctx,
    epoch,
    owner,
    async (m) => {
      const done: RecoveryResult['steps'] = [];
      for (const step of list) done.push({ name: step.name, result: await step.run(ctx, m, opts) });
      return { recovered: true, abandoned: fence, steps: done };
    },
    { purpose: 'crash recovery', takeOverStale: true, holdOnFailure: true },
  );
}
