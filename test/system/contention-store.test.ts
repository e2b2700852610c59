/**
 * The ContentionStore model's accounting (test/helpers/contention-store.ts): what it records per
 * labelled operation and the capacity it bills by DynamoDB's rules. The model's own arithmetic, so one
 * engine (SQLite) serves; the contention test runs the model over both engines.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { ConditionFailed } from '../../src/core/errors.ts';
import { cond, type Item } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { ContentionStore, sizeOf } from '../helpers/contention-store.ts';
import { tempDir } from '../helpers/tmp.ts';

function store(): ContentionStore {
  return new ContentionStore(new SqliteItemStore(path.join(tempDir('alp-cstore'), 'alp.db')));
}

const sized = (key: Partial<Item> & { PK: string; SK: string }, bytes: number): Item => {
  const item: Item = { ...key, pad: '' };
  item.pad = 'x'.repeat(bytes - sizeOf(item));
  assert.equal(sizeOf(item), bytes);
  return item;
};

test('plain and transactional writes bill 1 and 2 WCU per KB; GSI1 entries 1 WCU per KB in their partition', async () => {
  const s = store();
  try {
    await s.operation('put', 'a1', () => s.put(sized({ PK: 'P#1', SK: 'S', GSI1PK: 'G#A', GSI1SK: '1' }, 1500)));
    const [put] = s.traces;
    assert.deepEqual(
      put?.accesses.map((a) => [a.table, a.key, a.mode, a.wcu]),
      [
        ['base', 'P#1|S', 'write', 2],
        ['GSI1', 'G#A', 'write', 2],
      ],
    );
    // Moving the index entry: a delete in the old partition and a put in the new.
    await s.operation('move', 'a1', () => s.update({ PK: 'P#1', SK: 'S' }, { set: { GSI1PK: 'G#B' } }));
    assert.deepEqual(
      s.traces[1]?.accesses.filter((a) => a.table === 'GSI1').map((a) => a.key),
      ['G#A', 'G#B'],
    );
    await s.operation('tx', 'a2', () =>
      s.transactWrite([
        { op: 'put', item: sized({ PK: 'P#2', SK: 'S' }, 3000) },
        { op: 'check', key: { PK: 'P#1', SK: 'S' }, condition: cond.exists() },
      ]),
    );
    assert.deepEqual(
      s.traces[2]?.accesses.map((a) => [a.key, a.mode, a.wcu]),
      [
        ['P#2|S', 'write', 6],
        ['P#1|S', 'check', 4],
      ],
    );
    assert.equal(s.traces[2]?.calls.transactWrite, 1);
  } finally {
    await s.close();
  }
});

test('reads bill 1 RCU per 4 KB strong, 0.5 eventual; queries by the data read; GSI queries are eventual', async () => {
  const s = store();
  try {
    await s.put(sized({ PK: 'P#1', SK: 'S1', GSI1PK: 'G', GSI1SK: '1' }, 5000));
    await s.put(sized({ PK: 'P#1', SK: 'S2', GSI1PK: 'G', GSI1SK: '2' }, 5000));
    await s.operation('reads', 'a', async () => {
      await s.get({ PK: 'P#1', SK: 'S1' });
      await s.get({ PK: 'P#1', SK: 'S1' }, { consistent: false });
      await s.query({ pk: 'P#1' });
      await s.query({ index: 'GSI1', pk: 'G' });
      await s.get({ PK: 'P#1', SK: 'missing' });
    });
    assert.deepEqual(
      s.traces[0]?.accesses.map((a) => [a.table, a.op, a.consistent, a.rcu]),
      [
        ['base', 'get', true, 2],
        ['base', 'get', false, 1],
        ['base', 'query', true, 3],
        ['GSI1', 'query', false, 1.5],
        ['base', 'get', true, 1],
      ],
    );
    assert.equal(s.unlabelled.calls.put, 2, 'calls outside an operation are kept apart');
  } finally {
    await s.close();
  }
});

test('a cancelled transaction is recorded (billed, contended) and its error passes through; concurrent operations stay apart', async () => {
  const s = store();
  try {
    await s.put({ PK: 'P#1', SK: 'S' });
    await assert.rejects(
      s.operation('fail', 'a', () =>
        s.transactWrite([
          { op: 'put', item: { PK: 'P#2', SK: 'S' } },
          { op: 'check', key: { PK: 'P#1', SK: 'S' }, condition: cond.notExists() },
        ]),
      ),
      ConditionFailed,
    );
    assert.deepEqual(
      s.traces[0]?.accesses.map((a) => [a.key, a.failed]),
      [
        ['P#2|S', true],
        ['P#1|S', true],
      ],
    );
    assert.equal(await s.inner.get({ PK: 'P#2', SK: 'S' }), undefined, 'nothing written');
    await Promise.all(
      ['x', 'y', 'z'].map((id) =>
        s.operation(`op-${id}`, id, async () => {
          for (let i = 0; i < 5; i++) await s.put({ PK: `P#${id}`, SK: String(i) });
        }),
      ),
    );
    for (const t of s.traces.slice(1))
      assert.ok(
        t.accesses.every((a) => a.pk === `P#${t.artifact}`),
        `${t.kind} saw only its own writes`,
      );
  } finally {
    await s.close();
  }
});
