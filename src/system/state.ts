/**
 * The installation-wide system items every epoch-taking or publishing operation checks inside its own
 * transaction (docs/design.md §3): the epoch (SYS#installation/EPOCH, with one EPOCH#{n} record per advance),
 * the restore hold (SYS#installation/RESTORE_HOLD) and the content root (CONTENT_ROOT). The maintenance
 * fence is system/fence.ts; the whole interface is system/index.ts.
 */
import { ConditionFailed, Conflict, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import {
  CONTENT_ROOT_SK,
  EPOCH_RECORD_SK_PREFIX,
  EPOCH_SK,
  epochRecordSk,
  FENCE_SK,
  INSTALLATION_SK,
  RESTORE_HOLD_SK,
  SYS_PK,
} from '../core/keys.ts';
import { type Condition, cond, type Item, type ItemKey, type ItemStore, type TransactOp } from '../store/item-store.ts';

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
  return { op: 'check', key: epochKey, condition: epochCondition(epoch) };
}

/** The condition on the EPOCH item that holds only while `epoch` is the current epoch. */
export function epochCondition(epoch: number): Condition {
  const current = cond.eq('epoch', epoch);
  return epoch === INITIAL_EPOCH ? cond.or(cond.notExists(), current) : current;
}

/** A transaction operation that holds only while no restore hold is set. */
export function noRestoreHoldCheck(): TransactOp {
  return { op: 'check', key: restoreHoldKey, condition: cond.notExists() };
}

export async function isRestoreHeld(items: ItemStore): Promise<boolean> {
  return (await readRestoreHold(items)) !== undefined;
}

/** The restore hold, when one is set: the restore it names and since when. */
export async function readRestoreHold(items: ItemStore): Promise<{ restore_id: string; since: string } | undefined> {
  const hold = await items.get(restoreHoldKey, { consistent: true });
  return hold ? { restore_id: hold.restore_id as string, since: hold.since as string } : undefined;
}

/** The transaction operation that sets the restore hold (only where none is set). */
export function setRestoreHoldOp(restoreId: string, since: string): TransactOp {
  return { op: 'put', item: { ...restoreHoldKey, type: 'restore_hold', restore_id: restoreId, since }, condition: cond.notExists() };
}

/** The transaction operation that clears the hold of `restoreId` (and fails if another restore holds it). */
export function clearRestoreHoldOp(restoreId: string): TransactOp {
  return { op: 'delete', key: restoreHoldKey, condition: cond.eq('restore_id', restoreId) };
}

/** Live locks, never data: a backup leaves them out and a restore never writes them from a backup. */
export const LIVE_LOCK_KEYS: readonly ItemKey[] = [
  { PK: SYS_PK, SK: FENCE_SK },
  { PK: SYS_PK, SK: RESTORE_HOLD_SK },
];

/** What an item met in a full scan (a backup's snapshot) says about the installation-wide state. */
export function systemFactsOf(item: Item): { restoreHeld?: true; epoch?: number; installationId?: string } {
  if (item.PK !== SYS_PK) return {};
  if (item.SK === RESTORE_HOLD_SK) return { restoreHeld: true };
  if (item.SK === EPOCH_SK && typeof item.epoch === 'number') return { epoch: item.epoch };
  if (item.SK === INSTALLATION_SK) return { installationId: item.installation_id as string };
  return {};
}

/** Fails fast with STALE_EPOCH or RESTORE_HELD before an operation starts (its transaction re-checks). */
export async function assertEpochAndNoHold(items: ItemStore, epoch: number): Promise<void> {
  if (await isRestoreHeld(items)) throw new RestoreHeld();
  const current = await readEpoch(items);
  if (epoch !== current) throw new StaleEpoch(epoch, current);
}

export interface EpochRecord {
  epoch: number;
  advanced_at: string;
  advanced_by: string;
  reason: string;
  previous: number;
}

/**
 * The transaction operations that move the epoch from `current` to `current + 1`: the conditional
 * update of the EPOCH item and the EPOCH#{n} record of who advanced it and why. Part of any
 * transaction that must advance the epoch atomically with other writes (restore activation).
 */
export function epochAdvanceOps(current: number, at: string, by: string, reason: string): TransactOp[] {
  const next = current + 1;
  const record: EpochRecord = { epoch: next, advanced_at: at, advanced_by: by, reason, previous: current };
  return [
    {
      op: 'update',
      key: epochKey,
      update: { set: { type: 'epoch', epoch: next, advanced_at: at, advanced_by: by } },
      condition: epochCondition(current),
    },
    { op: 'put', item: { PK: SYS_PK, SK: epochRecordSk(next), type: 'epoch_record', ...record }, condition: cond.notExists() },
  ];
}

/**
 * Advances the installation epoch by one (a new storage worker, a takeover, crash recovery). Every
 * epoch-taking operation that still holds the old epoch is refused with STALE_EPOCH from then on.
 * Two racing advances each advance once (the loser re-reads and moves one further).
 */
export async function advanceEpoch(items: ItemStore, by: string, reason: string, at: string): Promise<EpochRecord> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const current = await readEpoch(items);
    try {
      await items.transactWrite(epochAdvanceOps(current, at, by, reason));
      return { epoch: current + 1, advanced_at: at, advanced_by: by, reason, previous: current };
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
    }
  }
  throw new Conflict('the epoch is being advanced concurrently; retry');
}

/** The last `limit` epoch advances, newest first. */
export async function epochHistory(items: ItemStore, limit = 20): Promise<EpochRecord[]> {
  const page = await items.query({ pk: SYS_PK, sk: { beginsWith: EPOCH_RECORD_SK_PREFIX }, descending: true, limit, consistent: true });
  return page.items.map((i) => ({
    epoch: i.epoch as number,
    advanced_at: i.advanced_at as string,
    advanced_by: i.advanced_by as string,
    reason: i.reason as string,
    previous: i.previous as number,
  }));
}

export const contentRootKey = { PK: SYS_PK, SK: CONTENT_ROOT_SK };

/**
 * Where the installation's objects live since it was restored (absent: since it was created). A
 * restore writes it; retention treats an orphan observation made before `since` in another root as
 * void, so a first observation after a restore into a different root starts a fresh grace period.
 */
export interface ContentRootRecord {
  location: string;
  since: string;
  restore_id: string;
  previous_location: string;
  changed: boolean;
}

export async function readContentRoot(items: ItemStore): Promise<ContentRootRecord | undefined> {
  const item = await items.get(contentRootKey, { consistent: true });
  if (!item) return undefined;
  return {
    location: item.location as string,
    since: item.since as string,
    restore_id: item.restore_id as string,
    previous_location: item.previous_location as string,
    changed: item.changed as boolean,
  };
}
