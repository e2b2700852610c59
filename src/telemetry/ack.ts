/**
 * `acknowledgeAll` of the telemetry outbox (queue.ts): a record's shard comes from its id
 * (shards.ts recordShard), its identity item says where it is; the deletes and each touched shard's
 * counter update commit together, up to 48 records per transaction.
 */
import { telqIdSk, telqShardPk } from '../core/keys.ts';
import { type Item, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import { commitLeavingLost, FIXED_CHECKS, type QueueView } from './claim.ts';
import { type AckInput, type AckRefusal, type AckResult, ackOps, ackRefusal } from './records.ts';
import { leavingCounterOps, recordShard } from './shards.ts';

interface AckPlan {
  index: number;
  id: string;
  shard: number;
  bytes: number;
  ops: TransactOp[];
}

/** Records per transaction: two deletes each, beside the three checks and the shards' counter updates. */
const PER_TRANSACTION = Math.floor((MAX_TRANSACT_OPS - FIXED_CHECKS - 1) / 2);

async function readTargets(q: QueueView, acks: AckInput[]): Promise<{ ids: Map<string, Item>; records: Map<string, Item> }> {
  const n = q.layout.shards;
  const keys = [...new Set(acks.map((a) => a.id))].map((id) => ({ PK: telqShardPk(recordShard(id, n), n), SK: telqIdSk(id) }));
  const ids = new Map((await q.items.batchGet(keys)).map((i) => [i.id as string, i]));
  const slots = [...ids.values()].map((i) => ({ PK: i.PK, SK: i.slot as string }));
  const records = new Map((await q.items.batchGet(slots)).map((r) => [`${r.PK} ${r.SK}`, r]));
  return { ids, records };
}

/** Commits one chunk; a record whose lease changed meanwhile is refused ('lost') and the rest retried. */
async function commitAcks(q: QueueView, epoch: number, chunk: AckPlan[], results: Map<number, AckResult>): Promise<void> {
  const done = await commitLeavingLost(
    q,
    epoch,
    chunk,
    (pending) => leavingCounterOps(pending, 'delivered', q.layout.shards),
    (lost) =>
      results.set(lost.index, {
        id: lost.id,
        acknowledged: false,
        reason: 'lost',
        message: 'its lease changed concurrently (reclaimed or acknowledged by someone else)',
      }),
  );
  for (const p of done) results.set(p.index, { id: p.id, acknowledged: true });
}

/** Chunks of at most PER_TRANSACTION records whose shards' counter updates still fit. */
function* ackChunks(plan: AckPlan[]): Generator<AckPlan[]> {
  let current: AckPlan[] = [];
  let shards = new Set<number>();
  for (const p of plan) {
    const extra = shards.has(p.shard) ? 0 : 1;
    if (
      current.length > 0 &&
      (current.length >= PER_TRANSACTION || FIXED_CHECKS + shards.size + extra + 2 * (current.length + 1) > MAX_TRANSACT_OPS)
    ) {
      yield current;
      current = [];
      shards = new Set();
    }
    current.push(p);
    shards.add(p.shard);
  }
  if (current.length > 0) yield current;
}

/** The caller validated the input and ran preflight. */
export async function acknowledgeRecords(q: QueueView, epoch: number, owner: string, acks: AckInput[], atMs: number): Promise<AckResult[]> {
  const { ids, records } = await readTargets(q, acks);
  const results = new Map<number, AckResult>();
  const refuse = (i: number, id: string, reason: AckRefusal, message: string) =>
    results.set(i, { id, acknowledged: false, reason, message });
  const plan: AckPlan[] = [];
  const seen = new Set<string>();
  for (const [i, a] of acks.entries()) {
    const idItem = ids.get(a.id);
    const rec = idItem ? records.get(`${idItem.PK} ${String(idItem.slot)}`) : undefined;
    const refusal = seen.has(a.id) ? (['duplicate', 'it is listed twice'] as const) : ackRefusal(rec, epoch, owner, a.leaseToken, atMs);
    seen.add(a.id);
    if (refusal || !idItem || !rec) {
      const [reason, message] = refusal ?? ['not_queued', 'it is not queued'];
      refuse(i, a.id, reason, message);
      continue;
    }
    const shard = recordShard(a.id, q.layout.shards);
    plan.push({ index: i, id: a.id, shard, bytes: rec.bytes as number, ops: ackOps(rec, idItem, epoch, owner, a.leaseToken, atMs) });
  }
  for (const chunk of ackChunks(plan)) await commitAcks(q, epoch, chunk, results);
  return acks.map((_, i) => results.get(i) as AckResult);
}
