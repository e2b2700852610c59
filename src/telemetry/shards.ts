/**
 * Telemetry shards (docs/design.md "Telemetry shards", docs/data-model.md): the outbox is split into E
 * partitions `TELQ#outbox#{s}` so no single item is written by every audit transaction. Each shard has
 * its own STATE (its share of the limits and its counters) and its own records; a record's shard is
 * the hash of its id up to the last ':' (for an audit event `{artifact_id}:{seq}` that is the
 * artifact, its aggregate; a custom id without ':' hashes whole), so every node finds it from the id.
 *
 * The root item TELQ#outbox / STATE holds the installation-wide limits, the schema, `shards` (E) and
 * the audit counter baseline. With E = 1 the root is the one shard's STATE and every key and counter
 * is exactly the unsharded outbox's.
 *
 * E = min(requested shards, max_records, floor(max_bytes / 1 KiB)), fixed when the queue is first
 * initialised: every shard can hold at least one record and 1 KiB. A shard's share of a limit is
 * floor(total / E), plus one for the first (total mod E) shards, so the shares sum to the configured
 * limit and the total live records and bytes never exceed it. A full shard drops (counted in that
 * shard) while others may have room: that is the price of no shared item.
 */

import { TELQ_PK, TELQ_STATE_SK, telqShardPk } from '../core/keys.ts';
import { shardOf } from '../core/shard.ts';
import { cond, type Item, type ItemKey, type ItemStore, type TransactOp } from '../store/item-store.ts';
import type { TelemetryLimits } from './limits.ts';

export const COUNTER_NAMES = ['accepted', 'delivered', 'dropped', 'exhausted', 'live_records', 'live_bytes'] as const;
export type TelemetryCounters = Record<(typeof COUNTER_NAMES)[number], number>;

/** The root state item: the installation-wide limits; with one shard also its counters. */
export const stateKey: ItemKey = { PK: TELQ_PK, SK: TELQ_STATE_SK };
/** Every shard's share of a limit is at least this many bytes. */
export const MIN_SHARD_BYTES = 1024;

export function effectiveShards(requested: number, limits: TelemetryLimits): number {
  return Math.max(1, Math.min(requested, limits.maxRecords, Math.floor(limits.maxBytes / MIN_SHARD_BYTES)));
}

/** Shard `s`'s share of `total` over `n` shards; the shares sum to `total`. */
export function share(total: number, s: number, n: number): number {
  return Math.floor(total / n) + (s < total % n ? 1 : 0);
}

export function shardLimits(limits: TelemetryLimits, s: number, n: number): TelemetryLimits {
  return { maxRecords: share(limits.maxRecords, s, n), maxBytes: share(limits.maxBytes, s, n), maxAttempts: limits.maxAttempts };
}

export const shardStateKey = (s: number, n: number): ItemKey => ({ PK: telqShardPk(s, n), SK: TELQ_STATE_SK });

/**
 * One counter update per shard for records leaving the queue (acknowledged: `delivered`; given up:
 * `exhausted`): that counter up, live_records and live_bytes down, in the transaction that removes them.
 */
export function leavingCounterOps(
  leaving: Iterable<{ shard: number; bytes: number }>,
  counter: 'delivered' | 'exhausted',
  n: number,
): TransactOp[] {
  const byShard = new Map<number, { records: number; bytes: number }>();
  for (const r of leaving) {
    const s = byShard.get(r.shard) ?? { records: 0, bytes: 0 };
    s.records++;
    s.bytes += r.bytes;
    byShard.set(r.shard, s);
  }
  return [...byShard].map(([shard, s]) => ({
    op: 'update' as const,
    key: shardStateKey(shard, n),
    update: { add: { [counter]: s.records, live_records: -s.records, live_bytes: -s.bytes } },
    condition: cond.exists(),
  }));
}

/** The hash key of a record id: its aggregate (everything before the last ':'), else the id. */
export function recordShard(id: string, n: number): number {
  const at = id.lastIndexOf(':');
  return shardOf(at > 0 ? id.slice(0, at) : id, n);
}

/** The shard count the root state item records (1 when it predates shards). */
export function shardsOf(root: Item): number {
  return typeof root.shards === 'number' ? root.shards : 1;
}

export function countersOf(item: Item | undefined): TelemetryCounters {
  const out = {} as TelemetryCounters;
  for (const c of COUNTER_NAMES) out[c] = typeof item?.[c] === 'number' ? (item[c] as number) : 0;
  return out;
}

export function sumCounters(all: TelemetryCounters[]): TelemetryCounters {
  const out = countersOf(undefined);
  for (const c of all) for (const k of COUNTER_NAMES) out[k] += c[k];
  return out;
}

export interface QueueStates {
  root: Item;
  shards: number;
  /** Every shard's STATE in shard order (the root itself when there is one shard); missing ones left out. */
  states: Item[];
}

/** The root and every shard's state, strongly consistent (one get, then batchGets of the shards). */
export async function readQueueStates(items: ItemStore): Promise<QueueStates | undefined> {
  const root = await items.get(stateKey, { consistent: true });
  if (!root) return undefined;
  const n = shardsOf(root);
  if (n === 1) return { root, shards: 1, states: [root] };
  const keys = Array.from({ length: n }, (_, s) => shardStateKey(s, n));
  const states: Item[] = [];
  for (let i = 0; i < keys.length; i += 100) states.push(...(await items.batchGet(keys.slice(i, i + 100))));
  return { root, shards: n, states };
}

/** The counters of the whole outbox: the sum of its shards'. */
export function totalCounters(q: QueueStates): TelemetryCounters {
  return sumCounters(q.states.map(countersOf));
}
