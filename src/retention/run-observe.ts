/**
 * The plan's observation writes, committed BEFORE the fence (issue 17 item 3: "observe and plan outside
 * the fence"): grace starts and resets decide nothing — a GRACE observation is only a start time,
 * eligibility is re-checked under the fence against every change since the plan, and the publish guard
 * (guard.ts) accepts GRACE — so they commit like any other writer's: with the publishers' fence check
 * (refused while a maintenance holds the fence), the epoch and no restore hold, each conditioned on the
 * state the plan saw. A first run over many new objects then no longer holds the fence for them.
 */
import { ConditionFailed, MaintenanceInProgress, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import type { TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { epochCheck, noRestoreHoldCheck, readEpoch } from '../system/state.ts';
import { type ActOutcome, BATCH, countUpdate, ObservationsChanged } from './run-act.ts';
import type { PlanSession } from './run-plan.ts';
import { type ObservationUpdate, updateOp } from './run-workset.ts';

/** Commits every pending observation write of `s` outside the fence and forgets it (the fence commits only what it adds). */
export async function observeBeforeFence(ctx: ServiceContext, s: PlanSession, epoch: number, out: ActOutcome): Promise<void> {
  const guards: TransactOp[] = [fenceCheck(ctx), epochCheck(epoch), noRestoreHoldCheck()];
  const commit = async (batch: ObservationUpdate[]) => {
    try {
      await ctx.items.transactWrite([...guards, ...batch.map(updateOp)]);
    } catch (e) {
      if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
      if (e.failedIndex === 0) throw new MaintenanceInProgress();
      if (e.failedIndex === 1) throw new StaleEpoch(epoch, await readEpoch(ctx.items));
      if (e.failedIndex === 2) throw new RestoreHeld();
      throw new ObservationsChanged(`${batch[e.failedIndex - guards.length]?.key ?? '?'} is no longer the observation the plan saw`);
    }
    for (const u of batch) {
      s.work.forget(u.key);
      countUpdate(out, u);
    }
  };
  for (const page of s.work.updates()) for (let i = 0; i < page.length; i += BATCH) await commit(page.slice(i, i + BATCH));
}
