/**
 * The delivery log of each endpoint (`WHLOG#{endpoint}`, core/keys.ts): one item per attempt — the
 * event, the outbox lease it was (attempt number), the HTTP status or the error, how long it took —
 * kept for the retention period (pruned by the dispatcher; `ttl` lets a DynamoDB TTL setting do it
 * too), and one `OK#{event id}` marker per event delivered there, so a retry of the event (its outbox
 * record was not acknowledged because another endpoint failed) skips this endpoint. Markers are
 * deleted once the record is acknowledged.
 */
import { newId } from '../core/ids.ts';
import { WEBHOOK_ATTEMPT_SK_PREFIX, webhookAttemptSk, webhookDeliveredSk, webhookDeliveryPk } from '../core/keys.ts';
import { cond, type Item, type ItemKey, queryAll, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';

export interface DeliveryAttempt {
  endpoint_id: string;
  event_id: string;
  event_type: string;
  /** The outbox lease this attempt was made under: 1 for the first delivery of the event. */
  attempt: number;
  at: string;
  duration_ms: number;
  outcome: 'delivered' | 'failed';
  status?: number;
  error?: string;
}

const BATCH = 100;
const PRUNE_PER_PASS = 100;

function attemptItem(a: DeliveryAttempt, id: string, retentionMs: number): Item {
  const expires = Date.parse(a.at) + retentionMs;
  return {
    PK: webhookDeliveryPk(a.endpoint_id),
    SK: webhookAttemptSk(a.at, id),
    type: 'webhook_attempt',
    ...a,
    ttl: Math.ceil(expires / 1000),
  };
}

function markerKey(endpointId: string, eventId: string): ItemKey {
  return { PK: webhookDeliveryPk(endpointId), SK: webhookDeliveredSk(eventId) };
}

/** Records one attempt; a delivered one writes the event's marker in the same transaction. */
export async function recordAttempt(ctx: ServiceContext, a: DeliveryAttempt, retentionMs: number): Promise<void> {
  const ops: TransactOp[] = [{ op: 'put', item: attemptItem(a, newId(ctx.clock), retentionMs) }];
  if (a.outcome === 'delivered')
    ops.push({ op: 'put', item: { ...markerKey(a.endpoint_id, a.event_id), type: 'webhook_delivered', event_id: a.event_id, at: a.at } });
  await ctx.items.transactWrite(ops);
}

/** Which of `pairs` (endpoint, event) were delivered already: keys `${endpoint} ${event}`. */
export async function deliveredPairs(ctx: ServiceContext, pairs: Array<{ endpointId: string; eventId: string }>): Promise<Set<string>> {
  const keys = pairs.map((p) => markerKey(p.endpointId, p.eventId));
  const pairOf = new Map(keys.map((k, i) => [`${k.PK} ${k.SK}`, `${pairs[i]?.endpointId} ${pairs[i]?.eventId}`]));
  const found = new Set<string>();
  for (let i = 0; i < keys.length; i += BATCH)
    for (const it of await ctx.items.batchGet(keys.slice(i, i + BATCH))) found.add(pairOf.get(`${it.PK} ${it.SK}`) as string);
  return found;
}

/** The markers of an acknowledged event: it will never be claimed again. */
export async function clearDelivered(ctx: ServiceContext, eventId: string, endpointIds: string[]): Promise<void> {
  for (let i = 0; i < endpointIds.length; i += BATCH) {
    const ops = endpointIds.slice(i, i + BATCH).map((ep): TransactOp => ({ op: 'delete', key: markerKey(ep, eventId) }));
    if (ops.length > 0) await ctx.items.transactWrite(ops);
  }
}

/** Deletes up to PRUNE_PER_PASS attempts of the endpoint older than `before` (oldest first). */
export async function pruneAttempts(ctx: ServiceContext, endpointId: string, before: string): Promise<number> {
  const page = await ctx.items.query({
    pk: webhookDeliveryPk(endpointId),
    sk: { between: [WEBHOOK_ATTEMPT_SK_PREFIX, `${WEBHOOK_ATTEMPT_SK_PREFIX}${before}`] },
    consistent: true,
    limit: PRUNE_PER_PASS,
  });
  const ops = page.items.map((it): TransactOp => ({ op: 'delete', key: { PK: it.PK, SK: it.SK }, condition: cond.exists() }));
  if (ops.length > 0) await ctx.items.transactWrite(ops);
  return ops.length;
}

/** An endpoint's attempts, newest first. */
export async function readAttempts(ctx: ServiceContext, endpointId: string, limit: number): Promise<DeliveryAttempt[]> {
  const page = await ctx.items.query({
    pk: webhookDeliveryPk(endpointId),
    sk: { beginsWith: WEBHOOK_ATTEMPT_SK_PREFIX },
    descending: true,
    consistent: true,
    limit,
  });
  return page.items.map(({ PK: _p, SK: _s, type: _t, ttl: _ttl, ...a }) => a as unknown as DeliveryAttempt);
}

/** Everything under the endpoint's delivery partition (after the endpoint was removed). */
export async function deleteDeliveryLog(ctx: ServiceContext, endpointId: string): Promise<void> {
  const all = await queryAll(ctx.items, { pk: webhookDeliveryPk(endpointId), consistent: true });
  for (let i = 0; i < all.length; i += BATCH) {
    const ops = all.slice(i, i + BATCH).map((it): TransactOp => ({ op: 'delete', key: { PK: it.PK, SK: it.SK } }));
    await ctx.items.transactWrite(ops);
  }
}
