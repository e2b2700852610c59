/**
 * Shared pieces of the fence-shard tests: installations on both engines with a given fence layout, a
 * store that "dies" after a number of transactions (a process crash at a chosen point of an acquisition
 * or release), a serialising store that records the commit order of every transaction (a faithful
 * model of commit order: DynamoDB Local serialises transactions anyway, so the order it records is
 * the order they took effect), and probes that condition-check one chosen shard.
 */
import { ConditionFailed } from '../../src/core/errors.ts';
import { shardOf } from '../../src/core/shard.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import type { ItemKey, ItemStore, TransactOp } from '../../src/store/item-store.ts';
import { fenceCheck, fenceKey } from '../../src/system/fence.ts';
import { isFenceShardKey } from '../../src/system/fence-shards.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { UNSHARDED } from '../../src/system/layout.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation } from '../helpers/distributed.ts';

export type Engine = 'sqlite' | 'dynamodb';
export const ENGINES: Engine[] = ['sqlite', 'dynamodb'];

export interface Opened {
  ctx: ServiceContext & { clock: import('../../src/core/clock.ts').ManualClock };
  close(): Promise<void>;
}

/** A fresh, initialised installation on `engine` with `fence_shards` = n. */
export async function installation(engine: Engine, n: number): Promise<Opened> {
  const layout = { ...UNSHARDED, fence_shards: n };
  if (engine === 'sqlite') {
    const ctx = await embeddedContext('2026-03-01T12:00:00.000Z', { layout });
    await initInstallation(ctx);
    return { ctx, close: () => ctx.items.close() };
  }
  const d = await distributedInstallation('2026-03-01T12:00:00.000Z', { layout });
  await initInstallation(d.ctx);
  return { ctx: d.ctx, close: d.close };
}

/** An artifact-like id whose fence shard (of n) is `shard`. */
export function idOnShard(shard: number, n: number): string {
  for (let i = 0; ; i++) if (shardOf(`probe-${i}`, n) === shard) return `probe-${i}`;
}

/** A publisher-shaped transaction on `shard`: one put plus the fence check; true when it committed. */
export async function probe(ctx: ServiceContext, shard: number): Promise<boolean> {
  const id = idOnShard(shard, ctx.layout.fence_shards);
  try {
    await ctx.items.transactWrite([
      { op: 'put', item: { PK: `PROBE#${id}`, SK: 'P', at: ctx.clock.now().toISOString() } },
      fenceCheck(ctx, { kind: 'artifacts', ids: [id] }),
    ]);
    return true;
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 1) return false;
    throw e;
  }
}

/** Every item whose PK is a fence shard's. */
export async function shardItems(items: ItemStore): Promise<ItemKey[]> {
  const out: ItemKey[] = [];
  let cursor: string | undefined;
  do {
    const page = await items.scan(cursor === undefined ? {} : { cursor });
    for (const i of page.items) if (isFenceShardKey(i)) out.push({ PK: i.PK, SK: i.SK });
    cursor = page.cursor;
  } while (cursor !== undefined);
  return out.sort((a, b) => (a.PK < b.PK ? -1 : 1));
}

/** `store`, until `transactions` more transactions have committed; then every call fails (the process died). */
export function dying(store: ItemStore, transactions: number): ItemStore {
  let left = transactions;
  const dead = () => Promise.reject(new Error('process crashed (test)'));
  return new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (left <= 0) return dead();
        if (prop === 'transactWrite') left--;
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

export type TxKind =
  | 'publisher'
  | 'fence-acquire-master'
  | 'fence-acquire-shards'
  | 'fence-release-shards'
  | 'fence-release-master'
  | 'other';

export interface Committed {
  kind: TxKind;
  ok: boolean;
}

function isMaster(k: ItemKey): boolean {
  return k.PK === fenceKey.PK && k.SK === fenceKey.SK;
}

/** What a transaction is, by its operations. */
export function classify(ops: readonly TransactOp[]): TxKind {
  const keyOf = (o: TransactOp): ItemKey => ('item' in o ? o.item : o.key) as ItemKey;
  if (ops.some((o) => o.op === 'put' && o.item.type === 'fence_shard')) return 'fence-acquire-shards';
  if (ops.some((o) => o.op === 'put' && o.item.type === 'fence')) return 'fence-acquire-master';
  if (ops.some((o) => o.op === 'delete' && isFenceShardKey(keyOf(o)))) return 'fence-release-shards';
  const publisherCheck = ops.some(
    (o) => o.op === 'check' && (isFenceShardKey(o.key) || isMaster(o.key)) && o.condition.kind === 'attrNotExists',
  );
  return publisherCheck ? 'publisher' : 'other';
}

/** `store` with every transaction and delete run one at a time, each recorded in `log` in commit order. */
export function serialised(store: ItemStore, log: Committed[]): ItemStore {
  let chain: Promise<unknown> = Promise.resolve();
  const locked = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn);
    chain = run.catch(() => {});
    return run;
  };
  const recorded = async (kind: TxKind, fn: () => Promise<void>) => {
    try {
      await fn();
      log.push({ kind, ok: true });
    } catch (e) {
      log.push({ kind, ok: false });
      throw e;
    }
  };
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'transactWrite')
        return (ops: TransactOp[], opts?: Parameters<ItemStore['transactWrite']>[1]) =>
          locked(() => recorded(classify(ops), () => target.transactWrite(ops, opts)));
      if (prop === 'delete')
        return (key: ItemKey, opts?: Parameters<ItemStore['delete']>[1]) =>
          locked(() => recorded(isMaster(key) ? 'fence-release-master' : 'other', () => target.delete(key, opts)));
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * The publisher commits that landed while the fence was wholly held: after the transaction that took
 * the last shard (with one shard, the master) and before the first release transaction.
 */
export function commitsInsideFence(log: readonly Committed[], n: number): number {
  const acquired: TxKind = n === 1 ? 'fence-acquire-master' : 'fence-acquire-shards';
  const released: TxKind = n === 1 ? 'fence-release-master' : 'fence-release-shards';
  let inside = false;
  let count = 0;
  for (const c of log) {
    if (!c.ok) continue;
    if (c.kind === acquired) inside = true;
    else if (c.kind === released) inside = false;
    else if (c.kind === 'publisher' && inside) count++;
  }
  return count;
}
