/**
 * `claim` of the telemetry outbox (queue.ts), over every shard (shards.ts): the shards that hold live
 * records are visited round-robin — one record from each in turn — starting where the previous claim
 * of this queue object stopped, so no shard is starved; maxRecords and maxBytes bound the whole claim.
 * A batch item (sink.ts) is unpacked into individual never-leased records before they are leased.
 * Every range is read with strongly consistent base-table queries (never GSI1, never a scan).
 */
import { ConditionFailed, InvalidInput, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { TELQ_FRESH_PREFIX, TELQ_SK_END, telqIdSk, telqLeaseEpochPrefix, telqLeaseSk, telqShardPk, telqTimeBound } from '../core/keys.ts';
import { cond, type Item, type ItemStore, MAX_TRANSACT_OPS, type SkCondition, type TransactOp } from '../store/item-store.ts';
import { epochCheck, noRestoreHoldCheck, readEpoch, readRestoreHold } from '../system/state.ts';
import { telemetryFenceCheck, telemetryFenced, telemetryIsFenced } from './fence.ts';
import { type ClaimedRecord, exhaustOps, idItem, type RecordKind } from './records.ts';
import { leavingCounterOps, readQueueStates } from './shards.ts';
import type { ShardLayout } from './sink.ts';

/** Records found exhausted during one claim that are settled by it (the rest wait for the next). */
const MAX_EXHAUST_PER_CLAIM = 500;

export interface QueueView {
  items: ItemStore;
  layout: ShardLayout;
  /** The installation's fence shard count (telemetry/fence.ts). */
  fenceShards: number;
}

export interface ClaimRequest {
  epoch: number;
  owner: string;
  nowMs: number;
  maxRecords: number;
  maxBytes: number;
  leaseMs: number;
  /** The shard the round-robin starts at; set to where this claim stopped. */
  rotor: { next: number };
}

interface Planned {
  shard: number;
  rec: Item;
  kind: 'claim' | 'exhaust';
  ops: TransactOp[];
  claimed?: ClaimedRecord;
}

/**
 * Before any read or write of a claim or acknowledgement: the restore hold, the epoch, and the fence
 * (an eventually consistent read of the fence shard of outbox shard 0: fails fast, and refuses a claim
 * that would find nothing to write too; the guarantee is each transaction's fence check).
 */
export async function preflight(q: QueueView, epoch: number): Promise<void> {
  const [hold, current, fenced] = await Promise.all([
    readRestoreHold(q.items),
    readEpoch(q.items),
    telemetryIsFenced(q.items, q.fenceShards, 0, q.layout.shards),
  ]);
  if (hold) throw new RestoreHeld('a restore hold is in force: telemetry cannot be claimed or acknowledged until the restore is activated');
  if (epoch !== current) throw new StaleEpoch(epoch, current);
  if (fenced) throw telemetryFenced('claim and acknowledge');
}

/** Operations every claim/ack transaction starts with: the epoch, restore-hold and fence checks. */
export const FIXED_CHECKS = 3;

/** Failed index 0 is the epoch check, 1 the restore-hold check and 2 the fence check in every claim/ack transaction. */
export async function raiseEpochOrHold(items: ItemStore, epoch: number, failedIndex: number): Promise<void> {
  if (failedIndex === 0) throw new StaleEpoch(epoch, await readEpoch(items));
  if (failedIndex === 1)
    throw new RestoreHeld('a restore hold is in force: telemetry cannot be claimed or acknowledged until the restore is activated');
  if (failedIndex === 2) throw telemetryFenced('claim and acknowledge');
}

/** The checks a claim/ack transaction on outbox shard `shard` starts with (FIXED_CHECKS of them). */
export function fixedChecks(q: QueueView, epoch: number, shard: number): TransactOp[] {
  return [epochCheck(epoch), noRestoreHoldCheck(), telemetryFenceCheck(q.fenceShards, shard, q.layout.shards)];
}

const RECORD_TYPES: readonly unknown[] = ['telemetry_record', 'telemetry_batch'];

async function* range(items: ItemStore, pk: string, sk: SkCondition, pageSize: number): AsyncGenerator<Item> {
  let cursor: string | undefined;
  do {
    const page = await items.query({ pk, sk, consistent: true, limit: pageSize, ...(cursor ? { cursor } : {}) });
    for (const item of page.items) if (RECORD_TYPES.includes(item.type)) yield item;
    cursor = page.cursor;
  } while (cursor);
}

/**
 * A shard's available records, oldest first: leases granted in older epochs (a new epoch may take
 * them), then never-leased records and expired leases of this epoch merged by the time they became
 * available.
 */
async function* available(items: ItemStore, pk: string, epoch: number, nowMs: number, pageSize: number): AsyncGenerator<Item> {
  const end = telqTimeBound(nowMs);
  if (epoch > 1) {
    yield* range(items, pk, { between: [telqLeaseEpochPrefix(1), `${telqLeaseEpochPrefix(epoch - 1)}${TELQ_SK_END}`] }, pageSize);
  }
  const fresh = range(items, pk, { between: [TELQ_FRESH_PREFIX, `${TELQ_FRESH_PREFIX}${end}#${TELQ_SK_END}`] }, pageSize);
  const expired = range(
    items,
    pk,
    { between: [telqLeaseEpochPrefix(epoch), `${telqLeaseEpochPrefix(epoch)}${end}#${TELQ_SK_END}`] },
    pageSize,
  );
  const at = (i: Item) => (i.lease_expires_ms ?? i.available_ms) as number;
  const tie = (i: Item) => String(i.id ?? i.SK);
  let a = await fresh.next();
  let b = await expired.next();
  while (!a.done || !b.done) {
    if (b.done || (!a.done && (at(a.value) < at(b.value) || (at(a.value) === at(b.value) && tie(a.value) <= tie(b.value))))) {
      yield a.value as Item;
      a = await fresh.next();
    } else {
      yield b.value;
      b = await expired.next();
    }
  }
}

/** The shards worth visiting, in round-robin order from the rotor: with one shard, shard 0 (no read). */
async function shardsToVisit(q: QueueView, rotor: number): Promise<number[]> {
  const n = q.layout.shards;
  if (n === 1) return [0];
  const states = await readQueueStates(q.items);
  const live = new Set((states?.states ?? []).filter((s) => (s.live_records as number) > 0).map((s) => s.shard as number));
  const order: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = (rotor + i) % n;
    if (live.has(s)) order.push(s);
  }
  return order;
}

/** Turns a batch item into its records (one transaction); [] when another claimer unpacked it first. */
async function unpack(q: QueueView, epoch: number, shard: number, batch: Item): Promise<Item[]> {
  const records = (batch.records as Item[]).map((r) => ({ ...r, PK: batch.PK }) as Item);
  try {
    await q.items.transactWrite([
      ...fixedChecks(q, epoch, shard),
      { op: 'delete', key: { PK: batch.PK, SK: batch.SK }, condition: cond.exists() },
      ...records.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
    ]);
    return records;
  } catch (e) {
    if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
    await raiseEpochOrHold(q.items, epoch, e.failedIndex);
    return [];
  }
}

/** One shard's records in order: unpacked batch records first, then the shard's range. */
interface Source {
  shard: number;
  buffer: Item[];
  gen: AsyncGenerator<Item>;
}

async function nextOf(q: QueueView, epoch: number, src: Source): Promise<Item | undefined> {
  for (;;) {
    const buffered = src.buffer.shift();
    if (buffered) return buffered;
    const r = await src.gen.next();
    if (r.done) return undefined;
    if (r.value.type !== 'telemetry_batch') return r.value;
    src.buffer.push(...(await unpack(q, epoch, src.shard, r.value)));
  }
}

/** The plan of one record: exhaust it (its last lease expired) or lease it. */
function planRecord(q: QueueView, req: ClaimRequest, shard: number, rec: Item): Planned {
  const attempts = rec.attempts as number;
  const idKey = { PK: rec.PK, SK: telqIdSk(rec.id as string) };
  if (attempts >= q.layout.limits.maxAttempts) return { shard, rec, kind: 'exhaust', ops: exhaustOps(rec) };
  const size = rec.bytes as number;
  const leaseToken = randomToken();
  const expiresMs = req.nowMs + req.leaseMs;
  const slot = telqLeaseSk(req.epoch, expiresMs, rec.id as string);
  const leaseExpiresAt = new Date(expiresMs).toISOString();
  const next: Item = {
    ...rec,
    SK: slot,
    attempts: attempts + 1,
    indexed: true,
    lease_owner: req.owner,
    lease_token: leaseToken,
    lease_epoch: req.epoch,
    lease_expires_ms: expiresMs,
    lease_expires_at: leaseExpiresAt,
    leased_at: new Date(req.nowMs).toISOString(),
  };
  // The identity item follows the record (an audit record's first lease creates it); its
  // condition lets only one of two racing claimers take the record.
  const idOp: TransactOp =
    rec.indexed === false
      ? { op: 'put', item: idItem(rec.PK, rec.id as string, slot, size), condition: cond.notExists() }
      : { op: 'update', key: idKey, update: { set: { slot } }, condition: cond.eq('slot', rec.SK) };
  const claimed: ClaimedRecord = {
    id: rec.id as string,
    kind: rec.kind as RecordKind,
    payload: rec.payload,
    bytes: size,
    attempts: attempts + 1,
    enqueuedAt: rec.enqueued_at as string,
    leaseToken,
    leaseExpiresAt,
  };
  return {
    shard,
    rec,
    kind: 'claim',
    ops: [
      idOp,
      { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: cond.eq('attempts', attempts) },
      { op: 'put', item: next, condition: cond.notExists() },
    ],
    claimed,
  };
}

/** Plans the claim: round-robin over the live shards until maxRecords or maxBytes is reached. */
async function planClaim(q: QueueView, req: ClaimRequest): Promise<Planned[]> {
  const n = q.layout.shards;
  const pageSize = Math.min(1000, req.maxRecords + 16);
  const sources: Source[] = (await shardsToVisit(q, req.rotor.next % n)).map((shard) => ({
    shard,
    buffer: [],
    gen: available(q.items, telqShardPk(shard, n), req.epoch, req.nowMs, pageSize),
  }));
  const plan: Planned[] = [];
  const seen = new Set<string>();
  let taken = 0;
  let bytes = 0;
  let exhausting = 0;
  let active = sources;
  while (active.length > 0) {
    const still: Source[] = [];
    for (const src of active) {
      let rec = await nextOf(q, req.epoch, src);
      while (rec && seen.has(`${rec.PK} ${String(rec.id)}`)) rec = await nextOf(q, req.epoch, src);
      if (!rec) continue;
      seen.add(`${rec.PK} ${String(rec.id)}`);
      still.push(src);
      const p = planRecord(q, req, src.shard, rec);
      if (p.kind === 'exhaust') {
        if (exhausting < MAX_EXHAUST_PER_CLAIM) plan.push(p);
        exhausting++;
        continue;
      }
      const size = p.rec.bytes as number;
      if (taken === 0 && size > req.maxBytes)
        throw new InvalidInput(
          `maxBytes ${req.maxBytes} is smaller than the oldest available record (${String(p.rec.id)}, ${size} bytes)`,
          {
            id: p.rec.id,
            bytes: size,
            max_bytes: req.maxBytes,
          },
        );
      if (bytes + size > req.maxBytes) {
        req.rotor.next = src.shard;
        return plan;
      }
      plan.push(p);
      taken++;
      bytes += size;
      if (taken >= req.maxRecords) {
        req.rotor.next = src.shard + 1;
        return plan;
      }
    }
    active = still;
  }
  return plan;
}

/** Chunks of plans whose operations, with one STATE update per shard that exhausts, fit one transaction. */
function* chunks(plan: Planned[], budget: number): Generator<Planned[]> {
  let current: Planned[] = [];
  let used = 0;
  let exhaustShards = new Set<number>();
  const cost = (p: Planned) => p.ops.length + (p.kind === 'exhaust' && !exhaustShards.has(p.shard) ? 1 : 0);
  for (const p of plan) {
    if (current.length > 0 && used + cost(p) > budget) {
      yield current;
      current = [];
      used = 0;
      exhaustShards = new Set();
    }
    used += cost(p);
    if (p.kind === 'exhaust') exhaustShards.add(p.shard);
    current.push(p);
  }
  if (current.length > 0) yield current;
}

/**
 * Commits `plans` in one transaction under the epoch, restore-hold and fence checks (the fence shard
 * of the first plan's outbox shard), `counterOps(pending)` first. A plan whose own operation's
 * condition failed (someone else took or settled that record meanwhile) is left out, `onLost` is
 * told, and the rest is retried. Returns the plans that committed. Shared by claim and acknowledge.
 */
export async function commitLeavingLost<P extends { ops: TransactOp[]; shard: number }>(
  q: QueueView,
  epoch: number,
  plans: P[],
  counterOps: (pending: P[]) => TransactOp[],
  onLost: (lost: P) => void = () => {},
): Promise<P[]> {
  const items = q.items;
  let pending = plans;
  while (pending.length > 0) {
    const counters = counterOps(pending);
    const ops: TransactOp[] = [...fixedChecks(q, epoch, (pending[0] as P).shard), ...counters];
    const owners: Array<P | undefined> = ops.map(() => undefined);
    for (const p of pending) {
      ops.push(...p.ops);
      for (const _ of p.ops) owners.push(p);
    }
    try {
      await items.transactWrite(ops);
      return pending;
    } catch (e) {
      if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
      await raiseEpochOrHold(items, epoch, e.failedIndex);
      const lost = owners[e.failedIndex];
      if (!lost) throw e;
      onLost(lost);
      pending = pending.filter((p) => p !== lost);
    }
  }
  return [];
}

/** Commits one chunk; a record another claimer took meanwhile is left out and the rest retried. */
function commitChunk(q: QueueView, epoch: number, chunk: Planned[]): Promise<Planned[]> {
  const exhausted = (pending: Planned[]) =>
    pending.filter((x) => x.kind === 'exhaust').map((p) => ({ shard: p.shard, bytes: p.rec.bytes as number }));
  return commitLeavingLost(q, epoch, chunk, (pending) => leavingCounterOps(exhausted(pending), 'exhausted', q.layout.shards));
}

/**
 * Leases the oldest available records of every shard (round-robin) to `req.owner`; records whose last
 * permitted lease expired are exhausted on the way. The caller validated the request and ran preflight.
 */
export async function claimRecords(q: QueueView, req: ClaimRequest): Promise<ClaimedRecord[]> {
  const plan = await planClaim(q, req);
  const out: ClaimedRecord[] = [];
  for (const chunk of chunks(plan, MAX_TRANSACT_OPS - FIXED_CHECKS)) {
    for (const p of await commitChunk(q, req.epoch, chunk)) if (p.claimed) out.push(p.claimed);
  }
  return out;
}
