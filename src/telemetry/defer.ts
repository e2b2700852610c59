/**
 * `deferAll` of the telemetry outbox (queue.ts): an exporter that failed to deliver a leased record
 * moves the lease's expiry to `at + delayMs` instead of acknowledging it, so the record is claimed
 * again only after that back-off (issue 20 item 5, the webhook dispatcher's exponential back-off).
 * The record keeps its attempts (the next claim counts the next lease) and its lease token; the move
 * is the claim's own: the slot item is re-keyed `L#{epoch}#{expires_ms}#{id}` and the identity item
 * follows it, both conditioned on the lease being this one, under the epoch, restore-hold and fence checks.
 */
import { telqIdSk, telqLeaseSk, telqShardPk } from '../core/keys.ts';
import { cond, type Item, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import { commitLeavingLost, FIXED_CHECKS, type QueueView } from './claim.ts';
import { type AckRefusal, ackRefusal, leaseHeld } from './records.ts';
import { recordShard } from './shards.ts';

export interface DeferInput {
  id: string;
  leaseToken: string;
  /** How long from `at` until the record may be claimed again. */
  delayMs: number;
}

export type DeferResult =
  | { id: string; deferred: true; availableAt: string }
  | { id: string; deferred: false; reason: AckRefusal; message: string };

interface DeferPlan {
  index: number;
  id: string;
  shard: number;
  availableAt: string;
  ops: TransactOp[];
}

/** Records per transaction: three operations each (identity update, slot delete, slot put) beside the checks. */
const PER_TRANSACTION = Math.floor((MAX_TRANSACT_OPS - FIXED_CHECKS) / 3);

function moveOps(rec: Item, idItem: Item, epoch: number, owner: string, leaseToken: string, atMs: number, untilMs: number): TransactOp[] {
  const slot = telqLeaseSk(epoch, untilMs, rec.id as string);
  const moved: Item = { ...rec, SK: slot, lease_expires_ms: untilMs, lease_expires_at: new Date(untilMs).toISOString() };
  return [
    { op: 'update', key: { PK: idItem.PK, SK: idItem.SK }, update: { set: { slot } }, condition: cond.eq('slot', rec.SK) },
    { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: leaseHeld(epoch, owner, leaseToken, atMs) },
    { op: 'put', item: moved, condition: cond.notExists() },
  ];
}

/** The caller validated the input and ran preflight (queue.ts deferAll). */
export async function deferRecords(q: QueueView, epoch: number, owner: string, defers: DeferInput[], atMs: number): Promise<DeferResult[]> {
  const n = q.layout.shards;
  const idKeys = [...new Set(defers.map((d) => d.id))].map((id) => ({ PK: telqShardPk(recordShard(id, n), n), SK: telqIdSk(id) }));
  const ids = new Map((await q.items.batchGet(idKeys)).map((i) => [i.id as string, i]));
  const slots = [...ids.values()].map((i) => ({ PK: i.PK, SK: i.slot as string }));
  const records = new Map((await q.items.batchGet(slots)).map((r) => [`${r.PK} ${r.SK}`, r]));
  const results = new Map<number, DeferResult>();
  const plan: DeferPlan[] = [];
  for (const [i, d] of defers.entries()) {
    const idItem = ids.get(d.id);
    const rec = idItem ? records.get(`${idItem.PK} ${String(idItem.slot)}`) : undefined;
    const refusal = ackRefusal(rec, epoch, owner, d.leaseToken, atMs);
    if (refusal || !idItem || !rec) {
      const [reason, message] = refusal ?? ['not_queued', 'it is not queued'];
      results.set(i, { id: d.id, deferred: false, reason, message });
      continue;
    }
    const untilMs = atMs + d.delayMs;
    plan.push({
      index: i,
      id: d.id,
      shard: recordShard(d.id, n),
      availableAt: new Date(untilMs).toISOString(),
      ops: moveOps(rec, idItem, epoch, owner, d.leaseToken, atMs, untilMs),
    });
  }
  for (let i = 0; i < plan.length; i += PER_TRANSACTION) {
    const chunk = plan.slice(i, i + PER_TRANSACTION);
    const lost = (p: DeferPlan) =>
      results.set(p.index, {
        id: p.id,
        deferred: false,
        reason: 'lost',
        message: 'its lease changed concurrently (expired and claimed again, or acknowledged)',
      });
    const done = await commitLeavingLost(q, epoch, chunk, () => [], lost);
    for (const p of done) results.set(p.index, { id: p.id, deferred: true, availableAt: p.availableAt });
  }
  return defers.map((_, i) => results.get(i) as DeferResult);
}
