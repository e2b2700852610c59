/**
 * The fence shards (docs/design.md §3 "The fence without a hot item"). With `layout.fence_shards` = N > 1
 * the fence is N shard items `SYS#fence#{s} / FENCE` (one partition each) beside the master item
 * `SYS#installation / FENCE`, which is the maintenance's mutex and identity (holder, token, epoch). A
 * publisher condition-checks the one shard its scope maps to; a maintenance holds the master first and
 * then every shard, and starts its work only once it holds them all. With N = 1 the master is the
 * only shard: exactly the single FENCE item of before.
 *
 * Only system/fence.ts and system/recovery.ts use this module.
 */
import { FENCE_SHARD_PK_PREFIX, FENCE_SK, fenceShardKey } from '../core/keys.ts';
import { allShards, shardOf } from '../core/shard.ts';
import { cond, type Item, type ItemKey, type ItemStore, type TransactOp } from '../store/item-store.ts';
import type { Layout } from './layout.ts';

/** Shards acquired or released per transaction: 97 shard items + the master check + the epoch check (+ a hold check) ≤ 100. */
export const FENCE_SHARD_CHUNK = 97;

/**
 * What a publisher's write touches, for the fence check. `artifacts`: the shard of the first id (every
 * artifact of one transaction is guarded by that one shard: a maintenance holds all of them).
 * `telemetry` / `installation`: the shard of `key` (default: the kind), any shard being as good.
 */
export type FenceScope =
  | { kind: 'artifacts'; ids: readonly string[] }
  | { kind: 'telemetry'; key?: string }
  | { kind: 'installation'; key?: string };

export const INSTALLATION_SCOPE: FenceScope = { kind: 'installation' };

/** The number of fence shards of a layout. */
export function shardCount(layout: Pick<Layout, 'fence_shards'> | undefined): number {
  return layout?.fence_shards ?? 1;
}

/** Which shard guards `scope` (0 with one shard). */
export function shardOfScope(scope: FenceScope, n: number): number {
  const key = scope.kind === 'artifacts' ? (scope.ids[0] ?? '') : (scope.key ?? scope.kind);
  return shardOf(key, n);
}

/** The key of the shard guarding `scope`: the master FENCE item itself when n = 1. */
export function shardKeyFor(scope: FenceScope, n: number): ItemKey {
  return fenceShardKey(shardOfScope(scope, n), n);
}

/** Whether `key` is a fence shard item of a sharded layout (a live lock: never backed up or restored). */
export function isFenceShardKey(key: ItemKey): boolean {
  return key.SK === FENCE_SK && key.PK.startsWith(`${FENCE_SHARD_PK_PREFIX}#`);
}

/** Every shard key of a sharded layout, in chunks a transaction can carry (none when n = 1). */
export function shardChunks(n: number): ItemKey[][] {
  if (n === 1) return [];
  const keys = allShards(n).map((s) => fenceShardKey(s, n));
  const out: ItemKey[][] = [];
  for (let i = 0; i < keys.length; i += FENCE_SHARD_CHUNK) out.push(keys.slice(i, i + FENCE_SHARD_CHUNK));
  return out;
}

export interface ShardStamp {
  holder: string;
  token: string;
  epoch: number;
  /** The maintenance fences readers too (MaintenanceOptions.fenceReaders). */
  readers?: boolean;
}

/**
 * The puts that take a chunk of shards for `stamp`. Fresh: each only where no holder is set. Re-stamp
 * (a takeover in a newer epoch): unconditional, because the master check in the same transaction
 * already proves the taker is the only one who may write shards (the master is the mutex; a shard
 * held by another token is a leftover of an earlier holder of the master, which has lost it).
 */
export function acquireShardOps(chunk: ItemKey[], stamp: ShardStamp, restamp: boolean): TransactOp[] {
  return chunk.map((key) => ({
    op: 'put',
    item: { ...key, type: 'fence_shard', ...stamp },
    ...(restamp ? {} : { condition: cond.attrNotExists('holder') }),
  }));
}

/** The deletes that release a chunk of shards held with `token` (or not held at all). */
export function releaseShardOps(chunk: ItemKey[], token: string): TransactOp[] {
  return chunk.map((key) => ({ op: 'delete', key, condition: cond.or(cond.attrNotExists('holder'), cond.eq('token', token)) }));
}

export interface ShardsStatus {
  /** layout.fence_shards. */
  count: number;
  /** Shards held with the master's token (with one shard: 1 while the master is held). */
  held: number;
  /** Shards held with another token (a leftover of an earlier holder, or held without a master). */
  held_by_other: number;
  /** The shards not held with the master's token, when some are (at most 20 listed). */
  missing?: number[];
}

/** Reads every shard (an operator's read: status and recovery, never a request path). */
export async function readShards(items: ItemStore, n: number, masterToken: string | undefined): Promise<ShardsStatus> {
  if (n === 1) return { count: 1, held: masterToken === undefined ? 0 : 1, held_by_other: 0 };
  const keys = allShards(n).map((s) => fenceShardKey(s, n));
  const found = new Map<string, Item>();
  for (const item of await items.batchGet(keys)) found.set(item.PK, item);
  const missing: number[] = [];
  let held = 0;
  let other = 0;
  keys.forEach((k, s) => {
    const item = found.get(k.PK);
    if (item?.holder !== undefined && item.token === masterToken) held++;
    else {
      if (item?.holder !== undefined) other++;
      missing.push(s);
    }
  });
  const telling = missing.length > 0 && (masterToken !== undefined || other > 0);
  return { count: n, held, held_by_other: other, ...(telling ? { missing: missing.slice(0, 20) } : {}) };
}
