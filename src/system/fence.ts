/**
 * The maintenance fence (docs/design.md §3, seed 004 "Trusted maintenance contract"), all of it: its check,
 * its acquisition, its release and (system/recovery.ts) its crash recovery. It is the master item
 * SYS#installation / FENCE (exclusive, epoch-stamped: the maintenance's mutex and identity) plus, when
 * the layout has `fence_shards` N > 1, N shard items SYS#fence#{s} / FENCE (system/fence-shards.ts); with
 * N = 1 the master is the only shard, exactly the single item of before. Only this module and
 * fence-shards.ts build their keys. Every publisher's own transaction carries `fenceCheck(ctx, scope)`:
 * a condition on the ONE shard its scope maps to (audit/chain commitAudited), so checks spread over N
 * items. A maintenance holds the master, then every shard, and only then starts its work; so while it
 * works every publisher is refused with MAINTENANCE, on DynamoDB across nodes too. A competing
 * maintenance is refused at the master, and a maintenance that names an old epoch with STALE_EPOCH.
 *
 * The fence expires only by explicit release (withMaintenance releases it when its function returns:
 * every shard, then the master) or, after a crash, by recovery in a newer epoch: an operator advances
 * the epoch (`alp epoch advance`), then `alp maintenance release --epoch N` takes the abandoned master
 * over in epoch N, re-stamps every shard, runs the registered recovery steps under it
 * (system/recovery.ts) and only then releases it. Until then publishers on held shards stay refused. A
 * zombie holder of the old epoch is fenced out too: its own transactions carry `handle.checks()` (its
 * token and its epoch on the master), which fail once the fence was taken over.
 *
 * Maintenance's own writes do not pass the publishers' check (the fence is held): they commit with
 * `handle.commit(ops)` / `handle.checks()`, which condition on holding the master instead.
 */
import os from 'node:os';
import type { Clock } from '../core/clock.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { FENCE_SK, SYS_PK } from '../core/keys.ts';
import { cond, type Item, type ItemStore, type TransactOp } from '../store/item-store.ts';
import {
  acquireShardOps,
  type FenceScope,
  INSTALLATION_SCOPE,
  readShards,
  releaseShardOps,
  type ShardsStatus,
  shardChunks,
  shardCount,
  shardKeyFor,
} from './fence-shards.ts';
import type { Layout } from './layout.ts';
import { epochCheck, noRestoreHoldCheck, readEpoch } from './state.ts';

export type { FenceScope } from './fence-shards.ts';

/** What the fence needs from a ServiceContext (system/context.ts): the item store, the clock and the layout (its shard count). */
export interface FenceDeps {
  items: ItemStore;
  clock: Clock;
  layout: Layout;
}

/** The master FENCE item (the maintenance's mutex and identity; with one shard also the only shard). Exported for tests. */
export const fenceKey = { PK: SYS_PK, SK: FENCE_SK };

/**
 * The check operation every publisher's transaction carries: it holds only while the one fence shard
 * guarding `scope` is not held (the master FENCE item when the layout has one shard).
 */
export function fenceCheck(ctx: Pick<FenceDeps, 'layout'>, scope: FenceScope = INSTALLATION_SCOPE): TransactOp {
  return { op: 'check', key: shardKeyFor(scope, shardCount(ctx.layout)), condition: cond.attrNotExists('holder') };
}

/**
 * Fails fast with MAINTENANCE when the shard guarding `scope` is held: an eventually consistent read of
 * that one shard (no strong read of a global item on the request path). Advisory only: a stale answer
 * either refuses a publisher just after a release (MAINTENANCE, retry) or lets it write bytes that its
 * transaction's `fenceCheck` then refuses (unreferenced bytes, reclaimed by retention). The guarantee
 * is the transaction's check.
 */
export async function assertNotFenced(ctx: Pick<FenceDeps, 'items' | 'layout'>, scope: FenceScope = INSTALLATION_SCOPE): Promise<void> {
  const fence = await ctx.items.get(shardKeyFor(scope, shardCount(ctx.layout)), { consistent: false });
  if (fence?.holder !== undefined) throw new MaintenanceInProgress(undefined, { holder: fence.holder, epoch: fence.epoch });
}

/**
 * The readers' check (seed 004: maintenance fences every "reader" too): fails with MAINTENANCE when the
 * shard guarding `scope` is held by a maintenance that fences readers (`readers: true`, retention and
 * crash recovery). Every content read that an entry point reaches calls it before it opens the bytes.
 * One eventually consistent read of that one shard, like assertNotFenced: a read that passes just before
 * the fence is taken (or on a stale answer) opens an object an item references, which a purge never
 * unlinks (docs/design.md §3 "Readers").
 */
export async function assertReadable(ctx: Pick<FenceDeps, 'items' | 'layout'>, scope: FenceScope = INSTALLATION_SCOPE): Promise<void> {
  const fence = await ctx.items.get(shardKeyFor(scope, shardCount(ctx.layout)), { consistent: false });
  if (fence?.holder !== undefined && fence.readers === true) {
    throw new MaintenanceInProgress(
      `reads are paused while ${String(fence.holder)} holds the maintenance fence (epoch ${String(fence.epoch)}); retry shortly`,
      { holder: fence.holder, epoch: fence.epoch, readers: true },
    );
  }
}

/** Whether the shard guarding `scope` is held (an eventually consistent read, for work that defers while fenced). */
export async function isFenced(ctx: Pick<FenceDeps, 'items' | 'layout'>, scope: FenceScope = INSTALLATION_SCOPE): Promise<boolean> {
  return (await ctx.items.get(shardKeyFor(scope, shardCount(ctx.layout)), { consistent: false }))?.holder !== undefined;
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
  /** Readers are refused too while it is held (MaintenanceOptions.fenceReaders; every shard carries it as well). */
  readers?: boolean;
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
  /**
   * Fence readers too (seed 004: "fence every artifact publisher, reader, …"): the master and every
   * shard carry `readers: true`, and every content read (`assertReadable`) is refused with MAINTENANCE
   * while it is held. Retention (QUARANTINE, PURGE) and crash recovery (which may finish a purge) set
   * it; backup, compaction and archive remove no bytes a reader could be reading and leave readers alone.
   */
  fenceReaders?: boolean;
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
 * Takes the fence for `owner` in `epoch`. First the master, with one conditional transaction: the epoch
 * is current, no fence is held (or, with takeOverStale, the held one is the abandoned fence of an older
 * epoch that was read), and optionally no restore hold is set. Then, with more than one shard, every
 * shard in chunks (`takeShards`). It returns only once every shard is held: the caller's work starts
 * after that, so from then until its release begins every publisher's transaction fails.
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
    ...(opts.fenceReaders ? { readers: true } : {}),
    ...(abandoned ? { took_over: abandonedFlat } : {}),
  };
  await takeMaster(ctx, fence, abandoned, opts);
  await takeShards(ctx, fence, opts.takeOverStale === true);
  return handleFor(ctx, fence, abandoned);
}

async function takeMaster(ctx: FenceDeps, fence: FenceInfo, abandoned: FenceInfo | undefined, opts: MaintenanceOptions): Promise<void> {
  const ops: TransactOp[] = [epochCheck(fence.epoch)];
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
    if (e.failedIndex === 0) throw new StaleEpoch(fence.epoch, await readEpoch(ctx.items));
    if (e.failedIndex === fenceIndex) throw fenceHeldError(await readFence(ctx), fence.epoch);
    if (opts.refuseWhileRestoreHeld && e.failedIndex === 1) throw new RestoreHeld();
    throw e;
  }
}

/** The check a shard write carries: the master is still this fence's, in its epoch. */
function masterCheck(fence: Pick<FenceInfo, 'token' | 'epoch'>): TransactOp {
  return { op: 'check', key: fenceKey, condition: cond.and(cond.eq('token', fence.token), cond.eq('epoch', fence.epoch)) };
}

/**
 * Holds every shard for `fence` (none to take with one shard), ≤ 97 per transaction, each transaction
 * conditioned on the master (token, epoch) and the epoch. A shard found held by another token without a
 * re-stamp means a fence without its master (not something the protocol leaves): what was taken is
 * given back and MAINTENANCE says how to recover. Any other failure gives back what was taken too (best
 * effort: if that fails as well, the state is the one a crash leaves, and recovery ends it).
 */
async function takeShards(ctx: FenceDeps, fence: FenceInfo, restamp: boolean): Promise<void> {
  const stamp = { holder: fence.holder, token: fence.token, epoch: fence.epoch, ...(fence.readers ? { readers: true } : {}) };
  const chunks = shardChunks(shardCount(ctx.layout));
  for (const [i, chunk] of chunks.entries()) {
    try {
      await ctx.items.transactWrite([masterCheck(fence), epochCheck(fence.epoch), ...acquireShardOps(chunk, stamp, restamp)]);
    } catch (e) {
      if (e instanceof ConditionFailed && (e.failedIndex === 0 || e.failedIndex === 1)) throw await lostError(ctx, fence);
      await releaseFence(ctx, fence, chunks.slice(0, i)).catch(() => {});
      if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
      const key = chunk[e.failedIndex - 2];
      const other = key ? await ctx.items.get(key, { consistent: true }) : undefined;
      throw new MaintenanceInProgress(
        `fence shard ${key?.PK ?? '?'} is held by ${String(other?.holder ?? '?')} (epoch ${String(other?.epoch ?? '?')}) without the master fence: ` +
          'advance the epoch (`alp epoch advance`), then recover with `alp maintenance release --epoch N`',
        { holder: other?.holder, epoch: other?.epoch },
      );
    }
  }
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

/** Why `fence` is no longer held: the epoch moved on (STALE_EPOCH) or another maintenance took it over. */
async function lostError(ctx: FenceDeps, fence: FenceInfo): Promise<Error> {
  const epoch = await readEpoch(ctx.items);
  if (epoch !== fence.epoch) return new StaleEpoch(fence.epoch, epoch);
  const now = await readFence(ctx);
  return new MaintenanceInProgress(
    `this maintenance no longer holds the fence${now ? `: ${now.holder} holds it in epoch ${now.epoch}` : ''}`,
    now ? { holder: now.holder, epoch: now.epoch } : undefined,
  );
}

function handleFor(ctx: FenceDeps, fence: FenceInfo, abandoned: FenceInfo | undefined): MaintenanceHandle {
  // The master only (token + epoch): a maintenance's own writes are few, and whoever holds the master holds every shard.
  const checks = (): TransactOp[] => [masterCheck(fence), epochCheck(fence.epoch)];
  return {
    fence,
    abandoned,
    checks,
    async commit(ops) {
      try {
        await ctx.items.transactWrite([...checks(), ...ops]);
      } catch (e) {
        if (!(e instanceof ConditionFailed)) throw e;
        if (e.failedIndex === 0 || e.failedIndex === 1) throw await lostError(ctx, fence);
        const index = e.failedIndex === undefined ? undefined : e.failedIndex - 2;
        throw new ConditionFailed(e.message, index);
      }
    },
    async assertHeld() {
      const [current, epoch] = await Promise.all([readFence(ctx), readEpoch(ctx.items)]);
      if (current?.token !== fence.token || epoch !== fence.epoch) throw await lostError(ctx, fence);
    },
  };
}

/**
 * Releases `fence`: the shards first, ≤ 97 per transaction, each conditioned on the master still being
 * this fence's, then the master (a conditional delete on its token). A crash in between leaves the
 * master held: `maintenance status` shows it partially released and recovery ends it.
 */
async function releaseFence(ctx: FenceDeps, fence: FenceInfo, chunks = shardChunks(shardCount(ctx.layout))): Promise<void> {
  for (const chunk of chunks) {
    const check: TransactOp = { op: 'check', key: fenceKey, condition: cond.eq('token', fence.token) };
    await ctx.items.transactWrite([check, ...releaseShardOps(chunk, fence.token)]);
  }
  await ctx.items.delete(fenceKey, { condition: cond.eq('token', fence.token) });
}

/** Releases the fence this handle holds; CONFLICT when another maintenance took it over first. */
export async function releaseMaintenance(ctx: FenceDeps, handle: MaintenanceHandle): Promise<void> {
  try {
    await releaseFence(ctx, handle.fence);
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const now = await readFence(ctx);
    if (now?.token === handle.fence.token) throw e;
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
  /** The master fence (holder, token, epoch…), when one is held. */
  fence: FenceInfo | undefined;
  /** Held by a maintenance of an older epoch: abandoned, waiting for recovery. */
  abandoned: boolean;
  /**
   * free: nothing held; held: the master and every shard; partial: the master and not every shard
   * (being acquired or released, or left so by a crash: publishers on the held shards are refused);
   * orphaned: shards held without a master (recover with `alp maintenance release`).
   */
  state: 'free' | 'held' | 'partial' | 'orphaned';
  shards: ShardsStatus;
}

/** The master, the epoch and every shard (an operator's read). */
export async function maintenanceStatus(ctx: FenceDeps): Promise<FenceStatus> {
  const [fence, epoch] = await Promise.all([readFence(ctx), readEpoch(ctx.items)]);
  const shards = await readShards(ctx.items, shardCount(ctx.layout), fence?.token);
  const state = fence ? (shards.held === shards.count ? 'held' : 'partial') : shards.held_by_other > 0 ? 'orphaned' : 'free';
  return { epoch, fence, abandoned: fence !== undefined && fence.epoch < epoch, state, shards };
}

/**
 * For tests that plant a fence by hand: writes the master and every shard of `ctx.layout` as held by
 * `fields` (what a crashed maintenance leaves); `clearFenceForTest` removes them all.
 */
export async function plantFenceForTest(ctx: Pick<FenceDeps, 'items' | 'layout'>, fields: Record<string, unknown>): Promise<void> {
  const stamp = { token: 'planted', ...fields };
  await ctx.items.put({ ...fenceKey, type: 'fence', ...stamp });
  for (const chunk of shardChunks(shardCount(ctx.layout)))
    await ctx.items.batchPut(chunk.map((k) => ({ ...k, type: 'fence_shard', ...stamp })));
}

export async function clearFenceForTest(ctx: Pick<FenceDeps, 'items' | 'layout'>): Promise<void> {
  for (const chunk of shardChunks(shardCount(ctx.layout))) for (const k of chunk) await ctx.items.delete(k);
  await ctx.items.delete(fenceKey);
}
