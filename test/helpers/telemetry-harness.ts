/**
 * Helpers for the telemetry suites: the invariant that the persisted counters equal what the items
 * show, the audit events a table holds, system items (epoch, restore hold) written as the recovery
 * service writes them, and an ItemStore wrapper that runs a hook before each transaction (to change
 * the world between an operation's pre-checks and its transaction) and counts the calls it sees.
 */
import assert from 'node:assert/strict';
import { isAuditType } from '../../src/audit/chain.ts';
import { TELQ_PK, telqShardPk } from '../../src/core/keys.ts';
import { type Item, type ItemStore, queryAll, type TransactOp } from '../../src/store/item-store.ts';
import { epochKey, restoreHoldKey } from '../../src/system/state.ts';
import { COUNTER_NAMES } from '../../src/telemetry/shards.ts';
import { allItems } from './items.ts';

export interface QueueContents {
  state: Item;
  ids: Item[];
  records: Item[];
  /** Batch items (many audit events of one transaction, unpacked at claim). */
  batches: Item[];
}

/**
 * `pk`: one telemetry shard's partition (src/telemetry/shards.ts). Without it, the whole outbox: with
 * shards, every shard's items merged, `state` the root with the shards' counters summed.
 */
export async function queueContents(items: ItemStore, pk?: string): Promise<QueueContents> {
  if (pk === undefined) {
    const root = await items.get({ PK: TELQ_PK, SK: 'STATE' }, { consistent: true });
    const n = typeof root?.shards === 'number' ? root.shards : 1;
    if (root && n > 1) {
      const parts = await Promise.all(Array.from({ length: n }, (_, s) => queueContents(items, telqShardPk(s, n))));
      const state: Item = { ...root };
      for (const c of COUNTER_NAMES) state[c] = parts.reduce((t, q) => t + ((q.state[c] as number | undefined) ?? 0), 0);
      return {
        state,
        ids: parts.flatMap((q) => q.ids),
        records: parts.flatMap((q) => q.records),
        batches: parts.flatMap((q) => q.batches),
      };
    }
  }
  const all = await queryAll(items, { pk: pk ?? TELQ_PK, consistent: true });
  const state = all.find((i) => i.SK === 'STATE');
  assert.ok(state, 'the queue state item exists');
  return {
    state,
    ids: all.filter((i) => i.type === 'telemetry_id'),
    records: all.filter((i) => i.type === 'telemetry_record'),
    batches: all.filter((i) => i.type === 'telemetry_batch'),
  };
}

/**
 * The counters equal what the items show: one slot item per live record, and one identity item per
 * custom or leased record pointing at it; live bytes are the payload bytes; everything accepted is
 * delivered, exhausted or live.
 */
export async function assertCountersMatchItems(items: ItemStore, pk?: string): Promise<QueueContents> {
  const q = await queueContents(items, pk);
  const s = q.state;
  // Custom records have an identity item from enqueue on, audit records from their first lease.
  const indexed = q.records.filter((r) => r.indexed !== false);
  assert.equal(q.ids.length, indexed.length, 'one identity item per indexed record');
  for (const r of q.records) {
    if (r.kind === 'custom' || r.lease_token !== undefined) assert.equal(r.indexed, true, `${String(r.id)} is indexed`);
    assert.equal(Buffer.byteLength(JSON.stringify(sortDeep(r.payload))), r.bytes, 'bytes are the payload’s canonical JSON size');
  }
  const bySk = new Map(q.records.map((r) => [r.SK, r]));
  for (const id of q.ids) {
    const rec = bySk.get(id.slot as string);
    assert.ok(rec, `identity ${String(id.id)} points at its record`);
    assert.equal(rec.id, id.id);
    assert.equal(rec.bytes, id.bytes);
  }
  const batched = q.batches.flatMap((b) => b.records as Item[]);
  for (const r of batched) assert.equal(r.indexed, false, 'a batched record has no identity item yet');
  assert.equal(s.live_records, q.records.length + batched.length, 'live_records equals the records held');
  assert.equal(
    s.live_bytes,
    [...q.records, ...batched].reduce((n, r) => n + (r.bytes as number), 0),
    'live_bytes equals the payload bytes held',
  );
  assert.equal(
    s.accepted,
    (s.delivered as number) + (s.exhausted as number) + (s.live_records as number),
    'accepted = delivered + exhausted + live',
  );
  assert.ok((s.live_records as number) <= (s.max_records as number), 'never more records than the limit');
  assert.ok((s.live_bytes as number) <= (s.max_bytes as number), 'never more bytes than the limit');
  return q;
}

function sortDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortDeep);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, x]) => [k, sortDeep(x)]),
    );
  return v;
}

/** Every audit item of the table (base-table scan), by event id `{artifact_id}:{seq}`. */
export async function auditItems(items: ItemStore): Promise<Map<string, Item>> {
  const out = new Map<string, Item>();
  for (const i of await allItems(items))
    if (i.PK.startsWith('ART#') && isAuditType(i.type)) out.set(`${String(i.artifact_id)}:${String(i.seq)}`, i);
  return out;
}

export async function setEpoch(items: ItemStore, epoch: number): Promise<void> {
  await items.put({ ...epochKey, type: 'epoch', epoch });
}

export async function setRestoreHold(items: ItemStore, on: boolean): Promise<void> {
  if (on) await items.put({ ...restoreHoldKey, type: 'restore_hold', restore_id: 'test' });
  else await items.delete(restoreHoldKey);
}

/**
 * An ItemStore that delegates every call to a real one (a Proxy, so it follows the contract as it
 * grows), counting the calls and running a one-shot hook before the next transaction.
 */
export interface Hooked {
  store: ItemStore;
  calls: Array<{ method: string; arg: unknown }>;
  /** Runs once, before the next transactWrite is passed on. */
  beforeNextTransact(hook: (ops: TransactOp[]) => Promise<void>): void;
}

export function hooked(inner: ItemStore): Hooked {
  const calls: Hooked['calls'] = [];
  let hook: ((ops: TransactOp[]) => Promise<void>) | undefined;
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        calls.push({ method: String(prop), arg: args[0] });
        if (prop === 'transactWrite' && hook) {
          const h = hook;
          hook = undefined;
          await h(args[0] as TransactOp[]);
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls, beforeNextTransact: (h) => (hook = h) };
}
