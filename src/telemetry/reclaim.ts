/**
 * Exhausted records release capacity at once (seed 004 "exhausted records release capacity and
 * increment exhausted"; issue 17 item 12). A record whose last permitted lease has expired is
 * exhausted from that instant, but it stays in its shard (and in live_records / live_bytes) until
 * something removes it. Claim does (claim.ts); so does the admit path: when a shard is full, the
 * writer (the audit sink, or a custom enqueue) looks for such records in that shard and removes them
 * in its own admit transaction, with their capacity released in the same STATE update (admitOp /
 * dropOp with `released`). So the installation-wide limits stay exact — live_records is always the
 * records held and never above the shard's share — and the admit stays one transaction.
 *
 * The search costs reads only on a full shard: a skip-scan of the shard's lease slots
 * `L#{epoch}#{expires_ms}#{id}` that reads each epoch's expired leases and jumps to the next epoch at
 * the first unexpired one, at most MAX_RECLAIM_READS items.
 */
import { TELQ_LEASE_PREFIX, TELQ_SK_END, telqLeaseEpochPrefix } from '../core/keys.ts';
import type { Item, ItemStore } from '../store/item-store.ts';
import type { Released } from './records.ts';

/** Exhausted records one commit removes from a full shard at most. */
export const RECLAIM_PER_COMMIT = 20;

/** Items read by one search at most (expired leases that may still retry are read and passed over). */
export const MAX_RECLAIM_READS = 200;

export interface Reclaimable extends Released {
  /** The exhausted records, each still in its lease slot (remove with exhaustOps). */
  items: Item[];
}

export const NONE_RECLAIMABLE: Reclaimable = { items: [], records: 0, bytes: 0 };

/**
 * Up to `max` records of partition `pk` whose last permitted lease (`attempts` ≥ `maxAttempts`)
 * expired at or before `nowMs`, oldest epoch and expiry first.
 */
export async function findReclaimable(items: ItemStore, pk: string, nowMs: number, maxAttempts: number, max: number): Promise<Reclaimable> {
  const found: Item[] = [];
  let start = TELQ_LEASE_PREFIX;
  let cursor: string | undefined;
  let reads = 0;
  while (found.length < max && reads < MAX_RECLAIM_READS) {
    const page = await items.query({
      pk,
      sk: { between: [start, `${TELQ_LEASE_PREFIX}${TELQ_SK_END}`] },
      consistent: true,
      limit: Math.min(50, MAX_RECLAIM_READS - reads),
      ...(cursor ? { cursor } : {}),
    });
    let jumped = false;
    for (const it of page.items) {
      reads++;
      if (it.type !== 'telemetry_record') continue;
      if ((it.lease_expires_ms as number) > nowMs) {
        // Leases of one epoch are ordered by expiry: the rest of this epoch has not expired either.
        start = telqLeaseEpochPrefix((it.lease_epoch as number) + 1);
        cursor = undefined;
        jumped = true;
        break;
      }
      if ((it.attempts as number) >= maxAttempts) found.push(it);
      if (found.length >= max) break;
    }
    if (!jumped) {
      if (!page.cursor) break;
      cursor = page.cursor;
    }
  }
  return { items: found, records: found.length, bytes: found.reduce((n, it) => n + (it.bytes as number), 0) };
}
