/**
 * The installation-wide system items every epoch-taking or publishing operation checks inside its own
 * transaction (DESIGN §6): the epoch (SYS#installation/EPOCH), the restore hold
 * (SYS#installation/RESTORE_HOLD) and the maintenance fence (SYS#installation/FENCE, see audit/chain).
 */
import { RestoreHeld, StaleEpoch } from '../core/errors.ts';
import { EPOCH_SK, RESTORE_HOLD_SK, SYS_PK } from '../core/keys.ts';
import { cond, type ItemStore, type TransactOp } from '../store/item-store.ts';

export const epochKey = { PK: SYS_PK, SK: EPOCH_SK };
export const restoreHoldKey = { PK: SYS_PK, SK: RESTORE_HOLD_SK };
export const INITIAL_EPOCH = 1;

/** The current epoch; an installation that never advanced it is at epoch 1. */
export async function readEpoch(items: ItemStore): Promise<number> {
  const item = await items.get(epochKey, { consistent: true });
  return (item?.epoch as number | undefined) ?? INITIAL_EPOCH;
}

/** A transaction operation that holds only while `epoch` is the current epoch. */
export function epochCheck(epoch: number): TransactOp {
  const current = cond.eq('epoch', epoch);
  return { op: 'check', key: epochKey, condition: epoch === INITIAL_EPOCH ? cond.or(cond.notExists(), current) : current };
}

/** A transaction operation that holds only while no restore hold is set. */
export function noRestoreHoldCheck(): TransactOp {
  return { op: 'check', key: restoreHoldKey, condition: cond.notExists() };
}

export async function isRestoreHeld(items: ItemStore): Promise<boolean> {
  return (await items.get(restoreHoldKey, { consistent: true })) !== undefined;
}

/** Fails fast with STALE_EPOCH or RESTORE_HELD before an operation starts (its transaction re-checks). */
export async function assertEpochAndNoHold(items: ItemStore, epoch: number): Promise<void> {
  if (await isRestoreHeld(items)) throw new RestoreHeld();
  const current = await readEpoch(items);
  if (epoch !== current) throw new StaleEpoch(epoch, current);
}
