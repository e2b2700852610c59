/**
 * The AuditSink the telemetry outbox plugs into every audit transaction (docs/design.md §5).
 *
 * - One transaction, chosen in advance: per shard the events touch, either the admit (a capacity-
 *   conditioned update of the shard's STATE plus the record puts) or the counted drop, whose condition
 *   is the admit's complement. The sink remembers per shard what the last commit found (full or not),
 *   so in steady state — a full queue or one with room — the first attempt commits. Only a flip (the
 *   shard filled or drained since) fails a condition; `retry` flips that shard and the commit is tried
 *   once more; if that fails too the unconditional `fallback` (a counted drop) commits.
 * - No silent drop for large transactions: events of a shard become one put each while they fit in the
 *   transaction's remaining operations (`budget`), else batch items of up to BATCH_EVENTS events each
 *   (unpacked into individual records at claim). Only a budget below two operations per shard drops.
 */
import { telqBatchSk, telqShardPk } from '../core/keys.ts';
import { cond, type Item, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent, AuditSink, SinkOps } from '../system/context.ts';
import type { TelemetryLimits } from './limits.ts';
import { admitOp, auditPayload, dropOp, recordItem, toMs } from './records.ts';
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
}

function groupByShard(events: AuditEvent[], n: number): Group[] {
  const groups = new Map<number, Group>();
  for (const e of events) {
    const shard = recordShard(e.event_id, n);
    const payload = auditPayload(e);
    const size = Buffer.byteLength(JSON.stringify(payload), 'utf8');
    const g = groups.get(shard) ?? { shard, records: [], bytes: 0 };
    g.records.push(recordItem(telqShardPk(shard, n), e.event_id, 'audit', payload, size, toMs(e.timestamp, 'event timestamp'), false));
    g.bytes += size;
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

interface Planned {
  ops: TransactOp[];
  /** The shard whose remembered state chose ops[i] (the admit or the complementary drop). */
  owner: Array<number | undefined>;
}

function plan(groups: Group[], layout: ShardLayout, full: ReadonlySet<number>, budget: number): Planned {
  const ops: TransactOp[] = [];
  const owner: Array<number | undefined> = [];
  for (const [i, g] of groups.entries()) {
    const key = shardStateKey(g.shard, layout.shards);
    const limits = shardLimits(layout.limits, g.shard, layout.shards);
    const n = g.records.length;
    const room = budget - ops.length - (groups.length - i - 1);
    const puts = 1 + n <= room ? g.records : 1 + Math.ceil(n / BATCH_EVENTS) <= room ? batchItems(g.records) : undefined;
    if (!puts) {
      // Not even a batch fits: a deliberate, counted drop (unconditional: it says nothing of the shard).
      ops.push(dropOp(key, n, true));
      owner.push(undefined);
    } else if (full.has(g.shard)) {
      ops.push(dropOp(key, n, true, limits, g.bytes));
      owner.push(g.shard);
    } else {
      ops.push(
        admitOp(key, limits, n, g.bytes, true),
        ...puts.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
      );
      owner.push(g.shard, ...puts.map(() => undefined));
    }
  }
  return { ops, owner };
}

/** Unconditional drops: one per shard when they fit, else one on the first shard counting every event. */
function fallbackOps(groups: Group[], layout: ShardLayout, budget: number): TransactOp[] {
  if (groups.length <= budget) return groups.map((g) => dropOp(shardStateKey(g.shard, layout.shards), g.records.length, true));
  const total = groups.reduce((n, g) => n + g.records.length, 0);
  return [dropOp(shardStateKey((groups[0] as Group).shard, layout.shards), total, true)];
}

/**
 * The sink of one queue. `full` is the queue's memory of which shards the last commit found full
 * (per process; a wrong guess costs one retry, never a lost audit write).
 */
export function telemetrySink(open: () => Promise<ShardLayout>, full: Set<number>): AuditSink {
  return {
    opsFor: async (events: AuditEvent[], budget = MAX_TRANSACT_OPS): Promise<SinkOps> => {
      if (events.length === 0) return { ops: [], fallback: [] };
      const layout = await open();
      const groups = groupByShard(events, layout.shards);
      const fallback = fallbackOps(groups, layout, Math.max(1, budget));
      if (budget < groups.length) return { ops: fallback, fallback };
      let current = plan(groups, layout, full, budget);
      return {
        ops: current.ops,
        fallback,
        retry: (failedOp: number) => {
          const shard = current.owner[failedOp];
          if (shard === undefined) return undefined;
          if (full.has(shard)) full.delete(shard);
          else full.add(shard);
          current = plan(groups, layout, full, budget);
          return current.ops;
        },
      };
    },
  };
}
