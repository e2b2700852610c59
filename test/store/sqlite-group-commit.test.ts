/**
 * Group commit of the SQLite engine (store/sqlite/group-commit.ts): concurrent callers share one
 * transaction and one COMMIT, each in its own savepoint. As a property over random concurrent callers
 * with conflicting conditions: every caller's answer and the committed state are those of the serial
 * order in which the callers reached the store, failed callers wrote nothing, and every answered
 * write is seen by another connection and after reopening the file. A failing COMMIT, and an error
 * after which SQLite rolled the whole transaction back (disk full), fail every caller of the batch.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ConditionFailed, InternalError, InvalidInput, StorageFailure } from '../../src/core/errors.ts';
import type { Condition, Item, ItemKey, TransactOp } from '../../src/store/item-store.ts';
import { applyUpdate, evaluateCondition } from '../../src/store/semantics.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';

const file = () => path.join(tempDir('alp-group'), 'alp.db');
const id = (k: ItemKey) => `${k.PK}/${k.SK}`;
const keyOf = (op: TransactOp): ItemKey => (op.op === 'put' ? { PK: op.item.PK, SK: op.item.SK } : { PK: op.key.PK, SK: op.key.SK });
const logRows = (s: SqliteItemStore) => s.db.prepare('SELECT keys FROM alp_changes WHERE n > 0 ORDER BY seq').pluck().all() as string[];

async function everything(store: SqliteItemStore): Promise<Record<string, Item>> {
  const out: Record<string, Item> = {};
  let cursor: string | undefined;
  do {
    const page = await store.scan(cursor ? { cursor } : {});
    for (const item of page.items) out[id(item)] = item;
    cursor = page.cursor;
  } while (cursor);
  return out;
}

// ---- a serial model of a caller's transaction (the semantics the engines share) ----

type Outcome = { ok: true } | { ok: false; error: string; failedIndex?: number | undefined };

function serially(state: Map<string, Item>, ops: TransactOp[]): Outcome {
  const next = new Map(state);
  for (const [index, op] of ops.entries()) {
    const key = keyOf(op);
    const current = state.get(id(key));
    if (op.condition && !evaluateCondition(op.condition, current)) return { ok: false, error: 'ConditionFailed', failedIndex: index };
    if (op.op === 'put') next.set(id(key), op.item);
    else if (op.op === 'delete') next.delete(id(key));
    else if (op.op === 'update') {
      try {
        next.set(id(key), applyUpdate(key, current, op.update));
      } catch (e) {
        if (e instanceof InvalidInput) return { ok: false, error: 'InvalidInput' };
        throw e;
      }
    }
  }
  for (const k of [...state.keys()]) if (!next.has(k)) state.delete(k);
  for (const [k, v] of next) state.set(k, v);
  return { ok: true };
}

function outcomeOf(r: PromiseSettledResult<unknown>): Outcome {
  if (r.status === 'fulfilled') return { ok: true };
  const e = r.reason;
  if (e instanceof ConditionFailed) return { ok: false, error: 'ConditionFailed', failedIndex: e.failedIndex };
  if (e instanceof InvalidInput) return { ok: false, error: 'InvalidInput' };
  throw e;
}

// ---- random callers over a small key space, so that their conditions conflict ----

const SKS = ['a', 'b', 'c', 'd'];
const value = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom('x', 'y'));
const condition: fc.Arbitrary<Condition | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.constant<Condition>({ kind: 'exists' }),
  fc.constant<Condition>({ kind: 'notExists' }),
  value.map((v): Condition => ({ kind: 'eq', attr: 'v', value: v })),
  fc.integer({ min: 0, max: 3 }).map((n): Condition => ({ kind: 'lt', attr: 'n', value: n })),
);
const op = (pk: string): fc.Arbitrary<TransactOp> =>
  fc.tuple(fc.constantFrom(...SKS), fc.nat(4), value, condition).map(([sk, kind, v, c]): TransactOp => {
    const key = { PK: pk, SK: sk };
    const withCondition = <T extends object>(o: T) => (c ? { ...o, condition: c } : o);
    if (kind === 0) return withCondition({ op: 'put' as const, item: { ...key, v, n: 0 } });
    if (kind === 1) return withCondition({ op: 'update' as const, key, update: { add: { n: 1 } } });
    // adding to a string attribute is InvalidInput inside the transaction: rolled back to the savepoint
    if (kind === 2) return withCondition({ op: 'update' as const, key, update: { set: { v }, add: { v: 1 } } });
    if (kind === 3) return withCondition({ op: 'delete' as const, key });
    return { op: 'check', key, condition: c ?? { kind: 'exists' } };
  });
const txn = (pk: string) =>
  fc.uniqueArray(op(pk), { minLength: 1, maxLength: 4, selector: (o) => id(keyOf(o)) }).filter((ops) => ops.some((o) => o.op !== 'check'));
/** A caller: how many event-loop turns it waits before writing (0: the same batch as the others), and its transaction. */
const caller = (pk: string) => fc.record({ waits: fc.nat(2), ops: txn(pk) });

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SQLite group commit', () => {
  it('property: concurrent callers with conflicting conditions commit exactly the outcome of their serial order', async () => {
    const f = file();
    const store = new SqliteItemStore(f);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(caller('P'), { minLength: 2, maxLength: 12 }), async (callers) => {
        const pk = `R${run++}`;
        const mine = callers.map((c) => ({ ...c, ops: c.ops.map((o) => rekey(o, pk)) }));
        const order: number[] = [];
        const answers = await Promise.allSettled(
          mine.map(async (c, i) => {
            for (let w = 0; w < c.waits; w++) await turn();
            order.push(i); // the call below runs its work before it returns: this is its serial position
            return store.transactWrite(c.ops);
          }),
        );
        const model = new Map<string, Item>();
        const expected: Outcome[] = [];
        for (const i of order) expected[i] = serially(model, mine[i]?.ops ?? []);
        assert.deepEqual(answers.map(outcomeOf), expected, 'each caller answered as in the serial order');
        const seen = Object.fromEntries(Object.entries(await everything(store)).filter(([k]) => k.startsWith(`${pk}/`)));
        assert.deepEqual(seen, Object.fromEntries(model), 'the committed set is the serial outcome');
      }),
      { numRuns: 40 },
    );
    const before = await everything(store);
    const other = new SqliteItemStore(f);
    assert.deepEqual(await everything(other), before, 'another connection sees every answered write');
    await other.close();
    await store.close();
    const reopened = new SqliteItemStore(f);
    assert.deepEqual(await everything(reopened), before, 'and so does the file reopened');
    await reopened.close();
  });

  it('callers that arrive together share one transaction (one change-log row), single-item writes included', async () => {
    const store = new SqliteItemStore(file());
    await Promise.all([
      store.put({ PK: 'G', SK: '1' }),
      store.update({ PK: 'G', SK: '2' }, { set: { v: 1 } }),
      store.transactWrite([{ op: 'put', item: { PK: 'G', SK: '3' } }]),
      store.batchPut([{ PK: 'G', SK: '4' }]),
    ]);
    assert.deepEqual(logRows(store), ['[["G","1"],["G","2"],["G","3"],["G","4"]]']);
    await store.put({ PK: 'G', SK: '5' });
    await store.put({ PK: 'G', SK: '6' });
    assert.equal(logRows(store).length, 3, 'a lone caller commits on its own');
    await store.close();
  });

  it('a caller is answered only after the COMMIT: before it, no other connection sees the write', async () => {
    const f = file();
    const store = new SqliteItemStore(f);
    const other = new SqliteItemStore(f);
    const pending = store.put({ PK: 'D', SK: '1', v: 1 });
    assert.equal(await other.get({ PK: 'D', SK: '1' }), undefined, 'not committed while the batch is open');
    assert.equal(await store.get({ PK: 'D', SK: '1' }), undefined, 'the store reads committed data only');
    await pending;
    assert.equal((await other.get({ PK: 'D', SK: '1' }))?.v, 1, 'committed once answered');
    await other.close();
    await store.close();
  });

  it('two stores on one file in one process write concurrently without waiting for each other', async () => {
    const f = file();
    const a = new SqliteItemStore(f, { busyTimeoutMs: 200 });
    const b = new SqliteItemStore(f, { busyTimeoutMs: 200 });
    // b's BEGIN would wait (synchronously) for a's open batch, whose COMMIT the waiting event loop never runs
    await Promise.all([a.put({ PK: 'T', SK: '1' }), b.put({ PK: 'T', SK: '2' }), a.put({ PK: 'T', SK: '3' })]);
    assert.deepEqual(Object.keys(await everything(b)).sort(), ['T/1', 'T/2', 'T/3']);
    await a.close();
    await b.close();
  });

  it('a failed condition fails only its caller; the others of the batch commit', async () => {
    const store = new SqliteItemStore(file());
    await store.put({ PK: 'C', SK: 'x', v: 1 });
    const answers = await Promise.allSettled([
      store.put({ PK: 'C', SK: 'y' }),
      store.transactWrite([
        { op: 'put', item: { PK: 'C', SK: 'z' } },
        { op: 'check', key: { PK: 'C', SK: 'x' }, condition: { kind: 'eq', attr: 'v', value: 2 } },
      ]),
      store.update({ PK: 'C', SK: 'x' }, { add: { v: 1 } }, { condition: { kind: 'eq', attr: 'v', value: 1 } }),
    ]);
    assert.equal(answers[0]?.status, 'fulfilled');
    assert.ok(answers[1]?.status === 'rejected' && answers[1].reason instanceof ConditionFailed && answers[1].reason.failedIndex === 1);
    assert.equal(answers[2]?.status, 'fulfilled');
    assert.deepEqual(Object.keys(await everything(store)).sort(), ['C/x', 'C/y']);
    assert.equal((await store.get({ PK: 'C', SK: 'x' }))?.v, 2);
    await store.close();
  });

  it('a failing COMMIT fails every caller of the batch, nothing of it is visible, and the next batch commits', async () => {
    const f = file();
    const store = new SqliteItemStore(f);
    // A deferred foreign key is checked by COMMIT only: a real COMMIT failure of SQLite.
    store.db.pragma('foreign_keys = ON');
    store.db.exec(`CREATE TABLE poison_parent (id INTEGER PRIMARY KEY);
      CREATE TABLE poison_child (pid INTEGER REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TRIGGER poison AFTER INSERT ON items WHEN NEW.PK = 'POISON' BEGIN INSERT INTO poison_child VALUES (1); END;`);
    const rowsBefore = logRows(store).length;
    const answers = await Promise.allSettled([
      store.put({ PK: 'A', SK: '1' }),
      store.put({ PK: 'POISON', SK: '1' }),
      store.transactWrite([{ op: 'update', key: { PK: 'A', SK: '2' }, update: { add: { n: 1 } } }]),
      // its condition fails on A/1 of the first caller, which is never committed: not a ConditionFailed
      store.put({ PK: 'A', SK: '1' }, { condition: { kind: 'notExists' } }),
    ]);
    for (const a of answers) assert.ok(a.status === 'rejected' && a.reason instanceof InternalError, 'every caller of the batch fails');
    assert.deepEqual(await everything(store), {}, 'nothing of the batch is visible');
    assert.equal(logRows(store).length, rowsBefore, 'nor logged');
    await store.put({ PK: 'A', SK: '3' });
    assert.deepEqual(Object.keys(await everything(store)), ['A/3']);
    await store.close();
    const reopened = new SqliteItemStore(f);
    assert.deepEqual(Object.keys(await everything(reopened)), ['A/3'], 'after reopening too');
    await reopened.close();
  });

  it('disk full (SQLITE_FULL rolls SQLite back whole): every caller of the batch fails with StorageFailure', async () => {
    const store = new SqliteItemStore(file());
    await store.put({ PK: 'F', SK: '0' });
    const pages = store.db.pragma('page_count', { simple: true }) as number;
    store.db.pragma(`max_page_count = ${pages + 1}`);
    const answers = await Promise.allSettled([
      store.put({ PK: 'F', SK: '1' }),
      store.put({ PK: 'F', SK: '2', big: 'x'.repeat(200_000) }),
      store.put({ PK: 'F', SK: '3' }),
    ]);
    const outcome = answers.map((a) =>
      a.status === 'fulfilled' ? 'ok' : a.reason instanceof StorageFailure ? 'storage' : String(a.reason),
    );
    const visible = Object.keys(await everything(store)).sort();
    // Whatever SQLite undid, the answers and the file agree: answered writes are there, failed ones are not.
    assert.equal(outcome[1], 'storage');
    assert.deepEqual(visible, ['F/0', ...['F/1', 'F/2', 'F/3'].filter((_, i) => outcome[i] === 'ok')], `answers ${outcome.join(', ')}`);
    assert.equal(outcome[0], 'storage', 'the caller before the failure lost its write with the rolled-back transaction');
    store.db.pragma('max_page_count = 1073741823');
    await store.put({ PK: 'F', SK: '4' });
    assert.ok((await store.get({ PK: 'F', SK: '4' })) !== undefined, 'the next batch commits');
    await store.close();
  });
});

function rekey(op: TransactOp, pk: string): TransactOp {
  if (op.op === 'put') return { ...op, item: { ...op.item, PK: pk } };
  return { ...op, key: { ...op.key, PK: pk } };
}
