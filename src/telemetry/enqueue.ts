/**
 * The writes of a custom enqueue (queue.ts `enqueue`): the capacity-conditioned admit or the counted
 * drop, each with the fence check first (telemetry/fence.ts), chosen from what this process last
 * found (`full`). In a shard found full, records whose last lease expired are removed by the admit
 * itself, their capacity released in the same STATE update (reclaim.ts), so a new record is admitted
 * at once instead of dropped while exhausted records still hold the space.
 */
import { ConditionFailed } from '../core/errors.ts';
import { cond, type Item, type ItemKey, type ItemStore, type TransactOp } from '../store/item-store.ts';
import { telemetryFenced } from './fence.ts';
import type { TelemetryLimits } from './limits.ts';
import { findReclaimable, RECLAIM_PER_COMMIT, type Reclaimable } from './reclaim.ts';
import { admitOp, dropOp, exhaustOps, NOTHING_RELEASED } from './records.ts';

export interface CustomWrite {
  items: ItemStore;
  shard: number;
  pk: string;
  /** The shard's STATE and its share of the limits. */
  key: ItemKey;
  limits: TelemetryLimits;
  /** The record's slot item and its identity item. */
  rec: Item;
  id: Item;
  bytes: number;
  atMs: number;
  fence: TransactOp;
}

/** Commits `ops` (the fence check first); -1 when it committed, else the failed index. MAINTENANCE when the fence failed. */
async function attempt(items: ItemStore, ops: TransactOp[]): Promise<number> {
  try {
    await items.transactWrite(ops);
    return -1;
  } catch (e) {
    if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
    if (e.failedIndex === 0) throw telemetryFenced('enqueue');
    return e.failedIndex;
  }
}

function admitOps(w: CustomWrite, r: Reclaimable | undefined): TransactOp[] {
  return [
    w.fence,
    admitOp(w.key, w.limits, 1, w.bytes, 0, r ?? NOTHING_RELEASED),
    ...(r?.items ?? []).flatMap(exhaustOps),
    { op: 'put', item: w.id, condition: cond.notExists() },
    { op: 'put', item: w.rec, condition: cond.notExists() },
  ];
}

/**
 * Admits the record or counts it dropped. 'racing': its own puts failed (the same id was enqueued
 * concurrently; the caller looks it up). Each step is one transaction; at most a few per call.
 */
export async function admitOrDrop(w: CustomWrite, full: Set<number>): Promise<'accepted' | 'dropped' | 'racing'> {
  for (let round = 0; round < 3; round++) {
    if (!full.has(w.shard)) {
      const failed = await attempt(w.items, admitOps(w, undefined));
      if (failed === -1) return 'accepted';
      if (failed !== 1) return 'racing';
      full.add(w.shard);
    }
    const r = await findReclaimable(w.items, w.pk, w.atMs, w.limits.maxAttempts, RECLAIM_PER_COMMIT);
    if (r.records > 0) {
      const ops = admitOps(w, r);
      const failed = await attempt(w.items, ops);
      if (failed === -1) return 'accepted';
      if (failed >= ops.length - 2) return 'racing';
      if (failed === 1) break; // no room even with them: a counted drop
      continue; // an exhausted record was removed by someone else meanwhile: search again
    }
    // Still full: the complementary drop commits while it is (one write); failing, the shard drained.
    if ((await attempt(w.items, [w.fence, dropOp(w.key, 1, 0, w.limits, w.bytes)])) === -1) return 'dropped';
    full.delete(w.shard);
  }
  await attempt(w.items, [w.fence, dropOp(w.key, 1)]);
  return 'dropped';
}
