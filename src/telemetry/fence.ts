/**
 * The maintenance fence on the telemetry outbox's own writes (seed 004: maintenance fences every
 * "database writer"; issue 17 item 9). The audit sink's records ride in the audit transaction, which
 * already carries the publisher's fence check (audit/chain.ts). The trusted host's custom enqueue,
 * claim (its unpack and lease transactions) and acknowledge carry `fenceCheck` with the telemetry
 * scope of the outbox shard they touch, so they spread over the fence shards like publishers do, and
 * fail with MAINTENANCE while a maintenance holds the fence. A maintenance holds every fence shard, so
 * any shard is as good as another; with one fence shard the check is on the master FENCE item.
 */
import { MaintenanceInProgress } from '../core/errors.ts';
import { telqShardPk } from '../core/keys.ts';
import type { ItemStore, TransactOp } from '../store/item-store.ts';
import { fenceCheck, isFenced } from '../system/fence.ts';
import { readLayout } from '../system/installation.ts';
import { UNSHARDED } from '../system/layout.ts';

/** The fence check of a telemetry write on outbox shard `shard` of `n`, in an installation with `fenceShards` fence shards. */
export function telemetryFenceCheck(fenceShards: number, shard: number, n: number): TransactOp {
  return fenceCheck({ layout: { ...UNSHARDED, fence_shards: fenceShards } }, { kind: 'telemetry', key: telqShardPk(shard, n) });
}

/** Whether the fence shard guarding outbox shard `shard` is held (an eventually consistent read: a fast failure only). */
export function telemetryIsFenced(items: ItemStore, fenceShards: number, shard: number, n: number): Promise<boolean> {
  return isFenced({ items, layout: { ...UNSHARDED, fence_shards: fenceShards } }, { kind: 'telemetry', key: telqShardPk(shard, n) });
}

export function telemetryFenced(what: string): MaintenanceInProgress {
  return new MaintenanceInProgress(`maintenance is in progress: telemetry ${what} is refused until it ends; retry`);
}

/**
 * The installation's fence shard count (its record's layout). Without a record (a bare store, before
 * `alp init`) 1: the master FENCE item, which every maintenance holds too, so the check stays correct.
 */
export async function installationFenceShards(items: ItemStore): Promise<number> {
  return (await readLayout(items))?.fence_shards ?? 1;
}
