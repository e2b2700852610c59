/**
 * The AuditSink the telemetry outbox plugs into every audit transaction (docs/design.md §5).
 *
 * - One transaction, chosen in advance: per shard the events touch, either the admit (a capacity-
 *   conditioned update of the shard's STATE plus the record puts) or the counted drop, whose condition
 *   is the admit's complement. The sink remembers per shard what the last commit found (full or not),
 *   so in steady state — a full queue or one with room — the first attempt commits. Only a flip (the
 *   shard filled or drained since) fails a condition; `retry` flips that shard and the commit is tried
 *   once more; if that fails too the unconditional `fallback` (a counted drop) commits.
 * - Exhausted records release capacity at once (reclaim.ts): in a shard believed full, records whose
 *   last lease expired are removed by this transaction, their capacity released in the same STATE
 *   update as the admit, so the event is admitted without waiting for a claim.
 * - No silent drop for large transactions: events of a shard become one put each while they fit in the
 *   transaction's remaining operations (`budget`), else batch items of up to BATCH_EVENTS events each
 *   (unpacked into individual records at claim). Only a budget below two operations per shard drops.
 */
import { telqBatchSk, telqShardPk } from '../core/keys.ts';
import { cond, type Item, type ItemStore, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent, AuditSink, SinkOps } from '../system/context.ts';
import type { TelemetryLimits } from './limits.ts';
import { findReclaimable, NONE_RECLAIMABLE, RECLAIM_PER_COMMIT, type Reclaimable } from './reclaim.ts';
import { admitOp, auditPayload, dropOp, exhaustOps, recordItem, toMs } from './records.ts';
import { recordShard, shardLimits, shardStateKey } from './shards.ts';

/** Events per batch item: an unpack (delete + one put each + epoch and hold checks) fits one transaction. */
export const BATCH_EVENTS = 90;

export interface ShardLayout {
  limits: TelemetryLimits;
  shards: number;
}

interface Group {
  shard: number;
  records: Item[];
  bytes: number;
  /** How many of the records are audit chain entries (what the append counter counts). */
  chained: number;
  /** The latest event time of the group: records whose last lease expired by then are exhausted. */
  nowMs: number;
}

function groupByShard(events: AuditEvent[], n: number): Group[] {
  const groups = new Map<number, Group>();
  for (const e of events) {
    const shard = recordShard(e.event_id, n);
    const payload = auditPayload(e);
    const size = Buffer.byteLength(JSON.stringify(payload), 'utf8');
    const at = toMs(e.timestamp, 'event timestamp');
    const g = groups.get(shard) ?? { shard, records: [], bytes: 0, chained: 0, nowMs: at };
    g.records.push(recordItem(telqShardPk(shard, n), e.event_id, 'audit', payload, size, at, false));
    g.bytes += size;
    if (e.chained !== false) g.chained += 1;
    g.nowMs = Math.max(g.nowMs, at);
    groups.set(shard, g);
  }
  return [...groups.values()];
}

/** The records of a group as batch items of up to BATCH_EVENTS records each. */
export function batchItems(records: Item[]): Item[] {
  const out: Item[] = [];
  for (let i = 0; i < records.length; i += BATCH_EVENTS) {
    const part = records.slice(i, i + BATCH_EVENTS);
    const first = part[0] as Item;
    out.push({
      PK: first.PK,
      SK: telqBatchSk(first.available_ms as number, first.id as string),
      type: 'telemetry_batch',
      available_ms: first.available_ms,
      records: part.map(({ PK: _p, ...r }) => r),
      count: part.length,
      bytes: part.reduce((n, r) => n + (r.bytes as number), 0),
    });
  }
  return out;
}

/**
 * What a failed sink op says: `capacity` — the shard's remembered state was wrong (flip it);
 * `reclaimAdmit` — even with the exhausted records it removes there is no room (drop, still removing
 * them); `stale` — an exhausted record was removed by someone else meanwhile (search again).
 */
type OwnerKind = 'capacity' | 'reclaimAdmit' | 'stale';

interface Planned {
  ops: TransactOp[];
  /** Which shard (and why) chose ops[i]. */
  owner: Array<{ shard: number; kind: OwnerKind } | undefined>;
}

/** Per commit: the exhausted records found in the full shards, and the shards to drop in even so. */
interface Memory {
  full: ReadonlySet<number>;
  reclaims: Map<number, Reclaimable>;
  dropReclaiming: Set<number>;
}

/** The part of `r` whose removal fits in `room` operations. */
function fitted(r: Reclaimable, room: number): { released: Reclaimable; ops: TransactOp[] } {
  const ops: TransactOp[] = [];
  const kept: Item[] = [];
  for (const it of r.items) {
    const more = exhaustOps(it);
    if (ops.length + more.length > room) break;
    ops.push(...more);
    kept.push(it);
  }
  return { released: { items: kept, records: kept.length, bytes: kept.reduce((n, it) => n + (it.bytes as number), 0) }, ops };
}

function planFull(g: Group, layout: ShardLayout, mem: Memory, puts: Item[], room: number, out: Planned): void {
  const key = shardStateKey(g.shard, layout.shards);
  const limits = shardLimits(layout.limits, g.shard, layout.shards);
  const n = g.records.length;
  const { released, ops: exhaust } = fitted(mem.reclaims.get(g.shard) ?? NONE_RECLAIMABLE, room - 1 - puts.length);
  const stale = exhaust.map(() => ({ shard: g.shard, kind: 'stale' as const }));
  if (released.records === 0) {
    out.ops.push(dropOp(key, n, g.chained, limits, g.bytes));
    out.owner.push({ shard: g.shard, kind: 'capacity' });
  } else if (mem.dropReclaiming.has(g.shard)) {
    out.ops.push(dropOp(key, n, g.chained, limits, g.bytes, released), ...exhaust);
    out.owner.push({ shard: g.shard, kind: 'capacity' }, ...stale);
  } else {
    out.ops.push(
      admitOp(key, limits, n, g.bytes, g.chained, released),
      ...exhaust,
      ...puts.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
    );
    out.owner.push({ shard: g.shard, kind: 'reclaimAdmit' }, ...stale, ...puts.map(() => undefined));
  }
}

function plan(groups: Group[], layout: ShardLayout, mem: Memory, budget: number): Planned {
  const out: Planned = { ops: [], owner: [] };
  for (const [i, g] of groups.entries()) {
    const key = shardStateKey(g.shard, layout.shards);
    const limits = shardLimits(layout.limits, g.shard, layout.shards);
    const n = g.records.length;
    const room = budget - out.ops.length - (groups.length - i - 1);
    const puts = 1 + n <= room ? g.records : 1 + Math.ceil(n / BATCH_EVENTS) <= room ? batchItems(g.records) : undefined;
    if (!puts) {
      // Not even a batch fits: a deliberate, counted drop (unconditional: it says nothing of the shard).
      out.ops.push(dropOp(key, n, g.chained));
      out.owner.push(undefined);
    } else if (mem.full.has(g.shard)) {
      planFull(g, layout, mem, puts, room, out);
    } else {
      out.ops.push(
        admitOp(key, limits, n, g.bytes, g.chained),
        ...puts.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
      );
      out.owner.push({ shard: g.shard, kind: 'capacity' }, ...puts.map(() => undefined));
    }
  }
  return out;
}

/** Unconditional drops: one per shard when they fit, else one on the first shard counting every event. */
function fallbackOps(groups: Group[], layout: ShardLayout, budget: number): TransactOp[] {
  if (groups.length <= budget) return groups.map((g) => dropOp(shardStateKey(g.shard, layout.shards), g.records.length, g.chained));
  const total = groups.reduce((n, g) => n + g.records.length, 0);
  const chained = groups.reduce((n, g) => n + g.chained, 0);
  return [dropOp(shardStateKey((groups[0] as Group).shard, layout.shards), total, chained)];
}

/**
 * The sink of one queue. `full` is the queue's memory of which shards the last commit found full
 * (per process; a wrong guess costs one retry, never a lost audit write). A shard believed full is
 * searched for exhausted records first (reclaim.ts), which the admit then removes.
 */
export function telemetrySink(open: () => Promise<ShardLayout>, full: Set<number>, items: ItemStore): AuditSink {
  return {
    opsFor: async (events: AuditEvent[], budget = MAX_TRANSACT_OPS): Promise<SinkOps> => {
      if (events.length === 0) return { ops: [], fallback: [] };
      const layout = await open();
      const groups = groupByShard(events, layout.shards);
      const fallback = fallbackOps(groups, layout, Math.max(1, budget));
      if (budget < groups.length) return { ops: fallback, fallback };
      const mem: Memory = { full, reclaims: new Map(), dropReclaiming: new Set() };
      const search = async (shard: number) => {
        const g = groups.find((x) => x.shard === shard) as Group;
        const pk = telqShardPk(shard, layout.shards);
        mem.reclaims.set(shard, await findReclaimable(items, pk, g.nowMs, layout.limits.maxAttempts, RECLAIM_PER_COMMIT));
      };
      for (const g of groups) if (full.has(g.shard)) await search(g.shard);
      let current = plan(groups, layout, mem, budget);
      return {
        ops: current.ops,
        fallback,
        retry: async (failedOp: number) => {
          const o = current.owner[failedOp];
          if (o === undefined) return undefined;
          if (o.kind === 'stale') await search(o.shard);
          else if (o.kind === 'reclaimAdmit') mem.dropReclaiming.add(o.shard);
          else if (full.has(o.shard)) full.delete(o.shard);
          else {
            full.add(o.shard);
            await search(o.shard);
          }
          current = plan(groups, layout, mem, budget);
          return current.ops;
        },
      };
    },
  };
}
