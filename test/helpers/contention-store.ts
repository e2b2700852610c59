/**
 * A contention model tests can see (issue 16, item 1). TEST AND BENCH ONLY: never imported by src/.
 *
 * `ContentionStore` wraps an ItemStore and records, per logical operation (the caller labels it:
 * `store.operation('propose', artifactId, fn)`), every call the operation makes and every item and
 * partition it touches, with the capacity DynamoDB would bill for it. DynamoDB Local serialises
 * transactions and shows no conflicts (/work/shared/ENVIRONMENT.md), so the per-item and per-partition
 * limits of real DynamoDB are made visible from these key traces instead (test/system/contention.test.ts,
 * bench/scale.ts), never from DynamoDB Local throughput.
 *
 * Costs, per the DynamoDB Developer Guide ("DynamoDB read and write operations", "Capacity unit
 * consumption"; "Global secondary indexes: provisioned throughput considerations"):
 * - a write (PutItem, UpdateItem, DeleteItem) costs 1 write unit per KB of the item, rounded up; for an
 *   update or delete the larger of the item before and after counts;
 * - a transactional write (each Put, Update, Delete or ConditionCheck of TransactWriteItems) costs 2
 *   write units per KB (a ConditionCheck is billed as a transactional write of the item it checks);
 * - a strongly consistent read costs 1 read unit per 4 KB (rounded up), an eventually consistent one
 *   0.5; BatchGetItem is billed per item like GetItem; Query and Scan are billed by the 4 KB of data
 *   they read (the sum of the item sizes, rounded up, at least one unit), GSI queries are eventual;
 * - a GSI write costs 1 write unit per KB of the projected item (GSI1 projects ALL: the whole item) for
 *   each index entry changed: a new entry is a put in its partition, a removed one a delete in the old
 *   one, a change of GSI1PK/GSI1SK both (delete in the old partition + put in the new), an update that
 *   keeps the index key rewrites the entry in place (one write).
 * Item size here is the item's JSON byte length (close to DynamoDB's attribute-name + value sizing).
 *
 * The before/after images needed for GSI accounting and update sizes are read from the inner store
 * (batchGet, strongly consistent) and are NOT counted: they are the model's own reads.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  Item,
  ItemKey,
  ItemSnapshot,
  ItemStore,
  Page,
  QueryInput,
  ScanOptions,
  TransactOp,
  TransactOptions,
  UpdateSpec,
  WriteOptions,
} from '../../src/store/item-store.ts';

export type AccessMode = 'write' | 'check' | 'read';
export type CallName = 'transactWrite' | 'get' | 'batchGet' | 'put' | 'update' | 'delete' | 'query' | 'scan' | 'batchPut';

/** One touch of one item or partition. */
export interface Access {
  call: CallName;
  /** put/update/delete/check inside a transaction, or the plain call. */
  op: 'put' | 'update' | 'delete' | 'check' | 'get' | 'query' | 'scan';
  mode: AccessMode;
  table: 'base' | 'GSI1';
  /** The item (`PK|SK`) for item accesses; the partition key for queries and GSI entries. */
  key: string;
  pk: string;
  consistent: boolean;
  bytes: number;
  wcu: number;
  rcu: number;
  /** Items a query or scan returned. */
  items?: number;
  /** Part of a transaction that was cancelled (a failed condition): billed, nothing written. */
  failed?: boolean;
}

export interface OperationTrace {
  kind: string;
  /** The artifact the operation acts on ('' for installation-wide calls such as listings). */
  artifact: string;
  /** Ids that make a key "the operation's own" (artifact, run, version, principal): per-entity keys. */
  entities: string[];
  calls: Record<string, number>;
  accesses: Access[];
}

const KB = 1024;
const RU_BYTES = 4 * KB;

export const sizeOf = (item: Item | undefined): number => (item ? Buffer.byteLength(JSON.stringify(item)) : 0);
const kb = (bytes: number) => Math.max(1, Math.ceil(bytes / KB));
const ru = (bytes: number) => Math.max(1, Math.ceil(bytes / RU_BYTES));
const itemKey = (k: ItemKey) => `${k.PK}|${k.SK}`;

export class ContentionStore implements ItemStore {
  readonly traces: OperationTrace[] = [];
  private readonly current = new AsyncLocalStorage<OperationTrace>();
  /** Calls made outside any labelled operation (setup): recorded here, left out of the analyses. */
  readonly unlabelled: OperationTrace = { kind: '(unlabelled)', artifact: '', entities: [], calls: {}, accesses: [] };

  constructor(readonly inner: ItemStore) {}

  get engine(): string {
    return this.inner.engine;
  }
  get location(): string {
    return this.inner.location;
  }

  /** Runs `fn` as one logical operation of `kind` on `artifact`; every store call inside is recorded. */
  async operation<T>(kind: string, artifact: string, fn: () => Promise<T>, entities: string[] = []): Promise<T> {
    const trace: OperationTrace = { kind, artifact, entities: [artifact, ...entities].filter(Boolean), calls: {}, accesses: [] };
    this.traces.push(trace);
    return this.current.run(trace, fn);
  }

  /** Adds ids (a run id learnt from the result) to the operation that just ran. */
  addEntities(trace: OperationTrace | undefined, ...ids: string[]): void {
    trace?.entities.push(...ids.filter(Boolean));
  }

  reset(): void {
    this.traces.length = 0;
  }

  private trace(call: CallName): OperationTrace {
    const t = this.current.getStore() ?? this.unlabelled;
    t.calls[call] = (t.calls[call] ?? 0) + 1;
    return t;
  }

  prepare(): Promise<{ created: boolean }> {
    return this.inner.prepare();
  }

  async get(key: ItemKey, opts?: { consistent?: boolean }): Promise<Item | undefined> {
    const t = this.trace('get');
    const item = await this.inner.get(key, opts);
    // Engines default to a strongly consistent get (store/item-store.ts, the DynamoDB engine).
    t.accesses.push(readAccess('get', 'get', 'base', itemKey(key), key.PK, opts?.consistent ?? true, sizeOf(item)));
    return item;
  }

  async batchGet(keys: ItemKey[]): Promise<Item[]> {
    const t = this.trace('batchGet');
    const items = await this.inner.batchGet(keys);
    const byKey = new Map(items.map((i) => [itemKey(i), i]));
    for (const k of keys) t.accesses.push(readAccess('batchGet', 'get', 'base', itemKey(k), k.PK, true, sizeOf(byKey.get(itemKey(k)))));
    return items;
  }

  async query(q: QueryInput): Promise<Page> {
    const t = this.trace('query');
    const page = await this.inner.query(q);
    const table = q.index === 'GSI1' ? 'GSI1' : 'base';
    const consistent = table === 'base' && (q.consistent ?? true);
    const bytes = page.items.reduce((n, i) => n + sizeOf(i), 0);
    const a = readAccess('query', 'query', table, q.pk, q.pk, consistent, bytes);
    a.items = page.items.length;
    t.accesses.push(a);
    return page;
  }

  async scan(opts?: ScanOptions): Promise<Page> {
    return this.recordScan(await this.inner.scan(opts));
  }

  /** Not an item access: the mark is a counter read (SQLite) or no request (DynamoDB). */
  changeMark(): Promise<string> {
    return this.inner.changeMark();
  }

  async scanChangedSince(mark: string, opts?: ScanOptions): Promise<Page> {
    return this.recordScan(await this.inner.scanChangedSince(mark, opts));
  }

  private recordScan(page: Page): Page {
    const t = this.trace('scan');
    const bytes = page.items.reduce((n, i) => n + sizeOf(i), 0);
    const a = readAccess('scan', 'scan', 'base', '(scan)', '(scan)', true, bytes);
    a.items = page.items.length;
    t.accesses.push(a);
    return page;
  }

  async put(item: Item, opts?: WriteOptions): Promise<void> {
    const t = this.trace('put');
    const [before] = await this.images([item]);
    await this.inner.put(item, opts);
    this.recordWrite(t, 'put', 'put', item, before, item, false);
  }

  async update(key: ItemKey, update: UpdateSpec, opts?: WriteOptions): Promise<Item> {
    const t = this.trace('update');
    const [before] = await this.images([key]);
    const after = await this.inner.update(key, update, opts);
    this.recordWrite(t, 'update', 'update', key, before, after, false);
    return after;
  }

  async delete(key: ItemKey, opts?: WriteOptions): Promise<void> {
    const t = this.trace('delete');
    const [before] = await this.images([key]);
    await this.inner.delete(key, opts);
    this.recordWrite(t, 'delete', 'delete', key, before, undefined, false);
  }

  async batchPut(items: Item[]): Promise<void> {
    const t = this.trace('batchPut');
    const before = await this.images(items);
    await this.inner.batchPut(items);
    items.forEach((item, i) => {
      this.recordWrite(t, 'batchPut', 'put', item, before[i], item, false);
    });
  }

  async transactWrite(ops: TransactOp[], opts?: TransactOptions): Promise<void> {
    const t = this.trace('transactWrite');
    const keys = ops.map(opKey);
    const before = await this.images(keys);
    try {
      await this.inner.transactWrite(ops, opts);
    } catch (e) {
      // A cancelled transaction still took part in the items' contention and is billed (DynamoDB bills
      // the write units of a failed TransactWriteItems): record its ops, marked failed, without GSI entries.
      ops.forEach((op, i) => {
        const key = keys[i] as ItemKey;
        const bytes = Math.max(sizeOf(before[i]), op.op === 'put' ? sizeOf(op.item) : 0);
        const mode = op.op === 'check' ? 'check' : 'write';
        t.accesses.push({ ...base('transactWrite', op.op, mode, itemKey(key), key.PK), bytes, wcu: 2 * kb(bytes), rcu: 0, failed: true });
      });
      throw e;
    }
    // After images: a put's is its item, a delete leaves none; only updates are read back.
    const updated = ops.flatMap((op, i) => (op.op === 'update' ? [i] : []));
    const read = await this.images(updated.map((i) => keys[i] as ItemKey));
    const after: (Item | undefined)[] = ops.map((op) => (op.op === 'put' ? op.item : undefined));
    updated.forEach((i, j) => {
      after[i] = read[j];
    });
    ops.forEach((op, i) => {
      const key = keys[i] as ItemKey;
      if (op.op === 'check') {
        const bytes = sizeOf(before[i]);
        t.accesses.push({ ...base('transactWrite', 'check', 'check', itemKey(key), key.PK), bytes, wcu: 2 * kb(bytes), rcu: 0 });
      } else this.recordWrite(t, 'transactWrite', op.op, key, before[i], after[i], true);
    });
  }

  /** The items at `keys` now, read from the inner store strongly and not counted (the model's own reads). */
  private async images(keys: ItemKey[]): Promise<(Item | undefined)[]> {
    const out: (Item | undefined)[] = [];
    for (let i = 0; i < keys.length; i += 100) {
      const chunk = keys.slice(i, i + 100).map((k) => ({ PK: k.PK, SK: k.SK }));
      const unique = [...new Map(chunk.map((k) => [itemKey(k), k])).values()];
      const found = new Map((await this.inner.batchGet(unique)).map((it) => [itemKey(it), it]));
      out.push(...chunk.map((k) => found.get(itemKey(k))));
    }
    return out;
  }

  private recordWrite(
    t: OperationTrace,
    call: CallName,
    op: 'put' | 'update' | 'delete',
    key: ItemKey,
    before: Item | undefined,
    after: Item | undefined,
    transactional: boolean,
  ): void {
    const bytes = Math.max(sizeOf(before), sizeOf(after));
    const wcu = (transactional ? 2 : 1) * kb(bytes);
    t.accesses.push({ ...base(call, op, 'write', itemKey(key), key.PK), bytes, wcu, rcu: 0 });
    t.accesses.push(...gsiWrites(call, op, before, after));
  }

  snapshot(opts?: { dir?: string }): Promise<ItemSnapshot> {
    return this.inner.snapshot(opts);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

function base(call: CallName, op: Access['op'], mode: AccessMode, key: string, pk: string) {
  return { call, op, mode, table: 'base' as const, key, pk, consistent: true };
}

function readAccess(
  call: CallName,
  op: Access['op'],
  table: Access['table'],
  key: string,
  pk: string,
  consistent: boolean,
  bytes: number,
): Access {
  return { call, op, mode: 'read', table, key, pk, consistent, bytes, wcu: 0, rcu: (consistent ? 1 : 0.5) * ru(bytes) };
}

/** The GSI1 entries a write changes: delete in the old partition, put in the new, or one rewrite in place. */
export function gsiWrites(call: CallName, op: Access['op'], before: Item | undefined, after: Item | undefined): Access[] {
  const entry = (i: Item | undefined) => (i?.GSI1PK !== undefined && i.GSI1SK !== undefined ? `${i.GSI1PK}|${i.GSI1SK}` : undefined);
  const was = entry(before);
  const is = entry(after);
  const acc = (item: Item, bytes: number): Access => ({
    call,
    op,
    mode: 'write',
    table: 'GSI1',
    key: item.GSI1PK as string,
    pk: item.GSI1PK as string,
    consistent: false,
    bytes,
    wcu: kb(bytes),
    rcu: 0,
  });
  if (was === undefined && is === undefined) return [];
  if (was === is) return JSON.stringify(before) === JSON.stringify(after) ? [] : [acc(after as Item, sizeOf(after))];
  const out: Access[] = [];
  if (was !== undefined) out.push(acc(before as Item, sizeOf(before)));
  if (is !== undefined) out.push(acc(after as Item, sizeOf(after)));
  return out;
}

function opKey(op: TransactOp): ItemKey {
  return op.op === 'put' ? { PK: op.item.PK, SK: op.item.SK } : op.key;
}
