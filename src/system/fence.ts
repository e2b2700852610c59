/**
 * The maintenance fence (docs/design.md §3, seed 004 "Trusted maintenance contract"), all of it: its check,
 * its acquisition, its release and (system/recovery.ts) its crash recovery. Today it is one exclusive,
 * epoch-stamped item, SYS#installation / FENCE, and only this file builds its key. While it is held
 * every publisher is refused with MAINTENANCE, because every publisher's own transaction carries
 * `fenceCheck(scope)` (audit/chain commitAudited), on DynamoDB across nodes too; a competing
 * maintenance is refused the same
 * way, and a maintenance that names an old epoch is refused with STALE_EPOCH.
 *
 * The fence expires only by explicit release (withMaintenance releases it when its function returns)
 * or, after a crash, by recovery in a newer epoch: an operator advances the epoch (`alp epoch
 * advance`), then `alp maintenance release --epoch N` takes the abandoned fence over in epoch N, runs
 * the registered recovery steps under it (system/recovery.ts) and only then releases it. Until then
 * publishers stay refused. A zombie holder of the old epoch is fenced out too: its own transactions
 * carry `handle.checks()` (its fence token and its epoch), which fail once the fence was taken over.
 *
 * Maintenance's own writes do not pass the publishers' check (the fence is held): they commit with
 * `handle.commit(ops)` / `handle.checks()`, which condition on holding the fence instead.
 */
import os from 'node:os';
import type { Clock } from '../core/clock.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { FENCE_SK, SYS_PK } from '../core/keys.ts';
import { cond, type Item, type ItemStore, type TransactOp } from '../store/item-store.ts';
import { epochCheck, noRestoreHoldCheck, readEpoch } from './state.ts';

/** What the fence needs from a ServiceContext (system/context.ts): the item store and the clock. */
export interface FenceDeps {
  items: ItemStore;
  clock: Clock;
}

/**
 * What a publisher's write touches, for the fence check. Every scope maps to the one installation-wide
 * FENCE item today; issue 13 may map a scope to its shard or lease item behind this same interface
 * (one check per scope, so callers' failed-index arithmetic holds), so callers name what they publish
 * and never build a fence key.
 */
export type FenceScope = { kind: 'artifacts'; ids: readonly string[] } | { kind: 'telemetry' } | { kind: 'installation' };

const INSTALLATION_SCOPE: FenceScope = { kind: 'installation' };

/** The FENCE item. Only this module reads or writes it; exported for tests that plant a fence. */
export const fenceKey = { PK: SYS_PK, SK: FENCE_SK };

/** The fence item guarding `scope` (the global FENCE, today). */
function fenceKeyFor(_scope: FenceScope): { PK: string; SK: string } {
  return fenceKey;
}

/** The check operation every publisher's transaction carries: it holds only while no fence guarding `scope` is held. */
export function fenceCheck(scope: FenceScope = INSTALLATION_SCOPE): TransactOp {
  return { op: 'check', key: fenceKeyFor(scope), condition: cond.attrNotExists('holder') };
}

/** Fails fast (before any bytes are written) with MAINTENANCE when a fence guarding `scope` is held. */
export async function assertNotFenced(deps: Pick<FenceDeps, 'items'>, scope: FenceScope = INSTALLATION_SCOPE): Promise<void> {
  const fence = await deps.items.get(fenceKeyFor(scope), { consistent: true });
  if (fence?.holder !== undefined) throw new MaintenanceInProgress(undefined, { holder: fence.holder, epoch: fence.epoch });
}

/** Whether a fence guarding `scope` is held right now (a read, for work that defers while fenced). */
export async function isFenced(deps: Pick<FenceDeps, 'items'>, scope: FenceScope = INSTALLATION_SCOPE): Promise<boolean> {
  return (await deps.items.get(fenceKeyFor(scope), { consistent: true }))?.holder !== undefined;
}

export interface FenceInfo {
  /** Who holds it: an operator-readable owner label (e.g. "retention os:alice"). */
  holder: string;
  /** Random, one per acquisition: the holder's proof in its own transactions. */
  token: string;
  epoch: number;
  acquired_at: string;
  purpose: string;
  host: string;
  pid: number;
  /** Set when this fence was taken over from an abandoned one (crash recovery). */
  took_over?: Omit<FenceInfo, 'took_over'>;
}

export interface MaintenanceOptions {
  /** What the maintenance does, for `alp maintenance status`. */
  purpose?: string;
  /**
   * Take over a fence left by a maintenance of an older epoch (crash recovery). Without it such a
   * fence refuses the new maintenance like any held fence.
   */
  takeOverStale?: boolean;
  /** Also refuse (RESTORE_HELD) while a restore hold is set, in the same transaction (retention). */
  refuseWhileRestoreHeld?: boolean;
  /**
   * Keep the fence when the function throws, so publishers stay out until an operator recovers
   * (a purge interrupted between its journal records). By default the fence is released either way.
   */
  holdOnFailure?: boolean;
}

export interface MaintenanceHandle {
  readonly fence: FenceInfo;
  /** The abandoned fence this maintenance took over, if any: what recovery has to look at. */
  readonly abandoned: FenceInfo | undefined;
  /**
   * Condition checks for every transaction the maintenance commits: it still holds the fence, in its
   * epoch (the FENCE item and the EPOCH item; a transaction may not touch them again).
   */
  checks(): TransactOp[];
  /** Commits `ops` with the checks; a failed check is STALE_EPOCH or MAINTENANCE, others keep their index. */
  commit(ops: TransactOp[]): Promise<void>;
  /** Fails fast (STALE_EPOCH / MAINTENANCE) when the fence is no longer this maintenance's. */
  assertHeld(): Promise<void>;
}

const MAX_OWNER_LENGTH = 200;

function toFence(item: Item | undefined): FenceInfo | undefined {
  if (!item || typeof item.holder !== 'string') return undefined;
  const { PK: _pk, SK: _sk, type: _type, ...rest } = item;
  return rest as unknown as FenceInfo;
}

/** The fence, when one is held. */
export async function readFence(ctx: Pick<FenceDeps, 'items'>): Promise<FenceInfo | undefined> {
  return toFence(await ctx.items.get(fenceKey, { consistent: true }));
}

/**
 * Takes the fence for `owner` in `epoch` with one conditional transaction: the epoch is current, no
 * fence is held (or, with takeOverStale, the held one is the abandoned fence of an older epoch that
 * was read), and optionally no restore hold is set.
 */
export async function acquireMaintenance(
  ctx: FenceDeps,
  epoch: number,
  owner: string,
  opts: MaintenanceOptions = {},
): Promise<MaintenanceHandle> {
  if (!Number.isSafeInteger(epoch) || epoch < 1) throw new InvalidInput('epoch must be a positive whole number');
  if (typeof owner !== 'string' || owner.trim() === '' || owner.length > MAX_OWNER_LENGTH)
    throw new InvalidInput(`maintenance owner must be 1–${MAX_OWNER_LENGTH} characters`);
  const existing = await readFence(ctx);
  const abandoned = opts.takeOverStale && existing && existing.epoch < epoch ? existing : undefined;
  const { took_over: _older, ...abandonedFlat } = abandoned ?? ({} as FenceInfo);
  const fence: FenceInfo = {
    holder: owner,
    token: randomToken(18),
    epoch,
    acquired_at: ctx.clock.now().toISOString(),
    purpose: opts.purpose ?? 'maintenance',
    host: os.hostname(),
    pid: process.pid,
    ...(abandoned ? { took_over: abandonedFlat } : {}),
  };
  const ops: TransactOp[] = [epochCheck(epoch)];
  if (opts.refuseWhileRestoreHeld) ops.push(noRestoreHoldCheck());
  const fenceIndex = ops.length;
  ops.push({
    op: 'put',
    item: { ...fenceKey, type: 'fence', ...fence },
    condition: abandoned ? cond.eq('token', abandoned.token) : cond.attrNotExists('holder'),
  });
  try {
    await ctx.items.transactWrite(ops);
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    if (e.failedIndex === 0) throw new StaleEpoch(epoch, await readEpoch(ctx.items));
    if (e.failedIndex === fenceIndex) throw fenceHeldError(await readFence(ctx), epoch);
    if (opts.refuseWhileRestoreHeld && e.failedIndex === 1) throw new RestoreHeld();
    throw e;
  }
  return handleFor(ctx, fence, abandoned);
}

function fenceHeldError(current: FenceInfo | undefined, epoch: number): MaintenanceInProgress {
  if (!current) return new MaintenanceInProgress('the maintenance fence changed hands while it was being taken; retry');
  const details = { holder: current.holder, epoch: current.epoch, acquired_at: current.acquired_at, purpose: current.purpose };
  if (current.epoch < epoch) {
    return new MaintenanceInProgress(
      `a maintenance of epoch ${current.epoch} (${current.holder}, ${current.purpose}, since ${current.acquired_at}) left its fence: ` +
        `recover it with \`alp maintenance release --epoch ${epoch}\``,
      details,
    );
  }
  return new MaintenanceInProgress(
    `maintenance is in progress: ${current.holder} (${current.purpose}) holds the fence in epoch ${current.epoch} since ${current.acquired_at}`,
    details,
  );
}

function handleFor(ctx: FenceDeps, fence: FenceInfo, abandoned: FenceInfo | undefined): MaintenanceHandle {
  const checks = (): TransactOp[] => [
    { op: 'check', key: fenceKey, condition: cond.and(cond.eq('token', fence.token), cond.eq('epoch', fence.epoch)) },
    epochCheck(fence.epoch),
  ];
  const lost = async (): Promise<Error> => {
    const epoch = await readEpoch(ctx.items);
    if (epoch !== fence.epoch) return new StaleEpoch(fence.epoch, epoch);
    const now = await readFence(ctx);
    return new MaintenanceInProgress(
      `this maintenance no longer holds the fence${now ? `: ${now.holder} holds it in epoch ${now.epoch}` : ''}`,
      now ? { holder: now.holder, epoch: now.epoch } : undefined,
    );
  };
  return {
    fence,
    abandoned,
    checks,
    async commit(ops) {
      try {
        await ctx.items.transactWrite([...checks(), ...ops]);
      } catch (e) {
        if (!(e instanceof ConditionFailed)) throw e;
        if (e.failedIndex === 0 || e.failedIndex === 1) throw await lost();
        const index = e.failedIndex === undefined ? undefined : e.failedIndex - 2;
        throw new ConditionFailed(e.message, index);
      }
    },
    async assertHeld() {
      const [current, epoch] = await Promise.all([readFence(ctx), readEpoch(ctx.items)]);
      if (current?.token !== fence.token || epoch !== fence.epoch) throw await lost();
    },
  };
}

/** Releases the fence this handle holds (a conditional delete on its token). */
export async function releaseMaintenance(ctx: FenceDeps, handle: MaintenanceHandle): Promise<void> {
  try {
    await ctx.items.delete(fenceKey, { condition: cond.eq('token', handle.fence.token) });
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const now = await readFence(ctx);
    throw new Conflict(
      `the maintenance fence of ${handle.fence.holder} (epoch ${handle.fence.epoch}) was taken over${now ? ` by ${now.holder} in epoch ${now.epoch}` : ' and released'} before it ended`,
    );
  }
}

/**
 * Runs `fn` under the exclusive maintenance fence, taken for `owner` in `epoch`. The fence is released
 * when `fn` returns or throws (unless holdOnFailure); a crash leaves it held until recovery.
 */
export async function withMaintenance<T>(
  ctx: FenceDeps,
  epoch: number,
  owner: string,
  fn: (m: MaintenanceHandle) => Promise<T>,
  opts: MaintenanceOptions = {},
): Promise<T> {
  const handle = await acquireMaintenance(ctx, epoch, owner, opts);
  let result: T;
  try {
    result = await fn(handle);
  } catch (e) {
    if (!opts.holdOnFailure) await releaseMaintenance(ctx, handle).catch(() => {});
    throw e;
  }
  await releaseMaintenance(ctx, handle);
  return result;
}

export interface FenceStatus {
  epoch: number;
  fence: FenceInfo | undefined;
  /** Held by a maintenance of an older epoch: abandoned, waiting for recovery. */
  abandoned: boolean;
}

export async function maintenanceStatus(ctx: FenceDeps): Promise<FenceStatus> {
  const [fence, epoch] = await Promise.all([readFence(ctx), readEpoch(ctx.items)]);
  return { epoch, fence, abandoned: fence !== undefined && fence.epoch < epoch };
}
