/**
 * The ItemStore contract as tests. Every engine runs exactly this suite (test/store/*.test.ts pass a
 * harness). Each test works in its own key namespace, so one store serves the whole suite.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { ConditionFailed, InternalError, InvalidInput, StorageFailure, Throttled } from '../../src/core/errors.ts';
import {
  type Condition,
  cond,
  type Item,
  type ItemSnapshot,
  type ItemStore,
  type Page,
  type QueryInput,
  type TransactOp,
} from '../../src/store/item-store.ts';
import { applyUpdate, compare, evaluateCondition } from '../../src/store/semantics.ts';

export interface ItemStoreHarness {
  name: string;
  open(): Promise<ItemStore>;
  /** fast-check runs for the property tests (fewer for slow engines). */
  runs: number;
  /** A store on the same kind of storage that refuses writes (SQLite: a database opened read-only). */
  readOnly?(): Promise<ItemStore>;
  /** A store whose storage cannot be reached (DynamoDB: a loopback port nobody listens on). */
  unreachable?(): Promise<ItemStore>;
}

async function queryAll(store: ItemStore, q: QueryInput): Promise<{ items: Item[]; pages: number }> {
  const items: Item[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page: Page = await store.query(cursor ? { ...q, cursor } : q);
    items.push(...page.items);
    cursor = page.cursor;
    pages++;
    assert.ok(pages < 10_000, 'pagination does not terminate');
  } while (cursor);
  return { items, pages };
}

// Long by nature: a suite registers one short, independent test per clause of the contract.
export function itemStoreConformance(h: ItemStoreHarness): void {
  describe(`ItemStore conformance: ${h.name}`, () => {
    let store: ItemStore;
    const ns = () => `T${randomUUID().slice(0, 8)}`;
    before(async () => {
      store = await h.open();
    });
    after(async () => {
      await store.close();
    });

    describe('declared errors (item-store.ts, ERRORS)', () => {
      it('prepare is idempotent and reports that it created nothing on a prepared table', async () => {
        assert.deepEqual(await store.prepare(), { created: false });
        assert.deepEqual(await store.prepare(), { created: false });
        const n = ns();
        await store.put({ PK: n, SK: 's' });
        assert.ok(await store.get({ PK: n, SK: 's' }));
      });

      it('a missing item is no error: get answers undefined, batchGet leaves it out, delete succeeds', async () => {
        const n = ns();
        await store.put({ PK: n, SK: 'here' });
        assert.equal(await store.get({ PK: n, SK: 'absent' }), undefined);
        assert.deepEqual(
          (
            await store.batchGet([
              { PK: n, SK: 'absent' },
              { PK: n, SK: 'here' },
            ])
          ).map((i) => i.SK),
          ['here'],
        );
        await store.delete({ PK: n, SK: 'absent' });
        assert.deepEqual((await store.query({ pk: `${n}-none` })).items, []);
      });

      it('every failed condition is ConditionFailed, with failedIndex in a transaction', async () => {
        const n = ns();
        const key = { PK: n, SK: 's' };
        await store.put({ ...key, v: 1 });
        const isCondition = (index?: number) => (e: unknown) => {
          assert.ok(e instanceof ConditionFailed, `ConditionFailed, got ${String(e)}`);
          assert.equal(e.code, 'CONDITION_FAILED');
          assert.equal(e.failedIndex, index);
          return true;
        };
        await assert.rejects(store.put({ ...key, v: 2 }, { condition: cond.notExists() }), isCondition());
        await assert.rejects(store.update(key, { set: { v: 3 } }, { condition: cond.eq('v', 9) }), isCondition());
        await assert.rejects(store.delete(key, { condition: cond.attrNotExists('v') }), isCondition());
        await assert.rejects(
          store.transactWrite([
            { op: 'put', item: { PK: n, SK: 'other' } },
            { op: 'check', key, condition: cond.eq('v', 2) },
          ]),
          isCondition(1),
        );
        assert.equal((await store.get(key))?.v, 1);
        assert.equal(await store.get({ PK: n, SK: 'other' }), undefined);
      });

      it('a call the contract refuses is InvalidInput and writes nothing', async () => {
        const n = ns();
        await assert.rejects(store.put({ PK: '', SK: 's' }), InvalidInput);
        await assert.rejects(store.update({ PK: n, SK: 's' }, { set: { PK: 'x' } }), InvalidInput);
        await assert.rejects(store.scan({ cursor: 'garbage' }), InvalidInput);
        assert.equal(await store.get({ PK: n, SK: 's' }), undefined);
      });

      it('a closed store fails every call with InternalError (a bug of the caller), and closing twice is fine', async () => {
        const closed = await h.open();
        await closed.close();
        await closed.close();
        const n = ns();
        const storage = (e: unknown) => {
          assert.ok(e instanceof InternalError && /closed/.test(e.message), `InternalError, got ${String(e)}`);
          assert.equal(e.code, 'INTERNAL');
          return true;
        };
        await assert.rejects(closed.get({ PK: n, SK: 's' }), storage);
        await assert.rejects(closed.put({ PK: n, SK: 's' }), storage);
        await assert.rejects(closed.update({ PK: n, SK: 's' }, { add: { n: 1 } }), storage);
        await assert.rejects(closed.query({ pk: n }), storage);
        await assert.rejects(closed.transactWrite([{ op: 'put', item: { PK: n, SK: 's' } }]), storage);
        await assert.rejects(closed.scan(), storage);
        await assert.rejects(closed.scan({ segment: 0, totalSegments: 2 }), storage);
        await assert.rejects(closed.changeMark(), storage);
        await assert.rejects(closed.scanChangedSince(await store.changeMark()), storage);
      });

      // Engines name the failures they can induce; each one named is checked.
      const { readOnly, unreachable } = h;
      if (readOnly)
        it('storage that refuses writes fails them with StorageFailure', async () => {
          const ro = await readOnly();
          try {
            const n = ns();
            assert.equal(await ro.get({ PK: n, SK: 's' }), undefined);
            await assert.rejects(ro.put({ PK: n, SK: 's' }), (e: unknown) => e instanceof StorageFailure && /read-only/.test(e.message));
            await assert.rejects(ro.transactWrite([{ op: 'put', item: { PK: n, SK: 's' } }]), (e: unknown) => e instanceof StorageFailure);
          } finally {
            await ro.close();
          }
        });

      if (unreachable)
        it('unreachable storage fails with Throttled (the request did not reach it), never an engine error', async () => {
          const down = await unreachable();
          try {
            const n = ns();
            await assert.rejects(down.get({ PK: n, SK: 's' }), (e: unknown) => e instanceof Throttled && e.code === 'THROTTLED');
            await assert.rejects(down.put({ PK: n, SK: 's' }, { condition: cond.notExists() }), Throttled);
          } finally {
            await down.close();
          }
        });
    });

    it('puts and gets an item with every JSON attribute type intact', async () => {
      const n = ns();
      const item: Item = {
        PK: `${n}#A`,
        SK: 'V#1',
        GSI1PK: `${n}#G`,
        GSI1SK: '#x',
        s: 'héllo ✓ 𝄞',
        n: 42,
        f: 1.5,
        neg: -7,
        t: true,
        fl: false,
        z: null,
        empty: '',
        arr: [1, 'two', { three: 3 }, [4]],
        map: { a: { b: { c: 'deep' } }, list: [] },
      };
      await store.put(item);
      assert.deepEqual(await store.get({ PK: item.PK, SK: item.SK }, { consistent: true }), item);
      assert.equal(await store.get({ PK: item.PK, SK: 'V#2' }), undefined);
    });

    it('a put replaces the whole item', async () => {
      const n = ns();
      await store.put({ PK: n, SK: 'a', x: 1, y: 2 });
      await store.put({ PK: n, SK: 'a', x: 3 });
      assert.deepEqual(await store.get({ PK: n, SK: 'a' }), { PK: n, SK: 'a', x: 3 });
    });

    it('a conditional put that fails changes nothing and throws ConditionFailed', async () => {
      const n = ns();
      await store.put({ PK: n, SK: 'a', v: 1 }, { condition: cond.notExists() });
      await assert.rejects(store.put({ PK: n, SK: 'a', v: 2 }, { condition: cond.notExists() }), ConditionFailed);
      assert.equal((await store.get({ PK: n, SK: 'a' }))?.v, 1);
      await store.put({ PK: n, SK: 'a', v: 3 }, { condition: cond.eq('v', 1) });
      assert.equal((await store.get({ PK: n, SK: 'a' }))?.v, 3);
    });

    it('update sets, adds, removes, upserts and returns the new item', async () => {
      const n = ns();
      const created = await store.update({ PK: n, SK: 'c' }, { set: { name: 'x' }, add: { count: 2 } });
      assert.deepEqual(created, { PK: n, SK: 'c', name: 'x', count: 2 });
      const next = await store.update({ PK: n, SK: 'c' }, { add: { count: 3 }, remove: ['name'], set: { GSI1PK: `${n}#g`, GSI1SK: '#1' } });
      assert.deepEqual(next, { PK: n, SK: 'c', count: 5, GSI1PK: `${n}#g`, GSI1SK: '#1' });
      assert.deepEqual(await store.get({ PK: n, SK: 'c' }), next);
      await assert.rejects(store.update({ PK: n, SK: 'c' }, { set: { PK: 'other' } }), InvalidInput);
      await assert.rejects(store.update({ PK: n, SK: 'missing' }, { set: { a: 1 } }, { condition: cond.exists() }), ConditionFailed);
      assert.equal(await store.get({ PK: n, SK: 'missing' }), undefined);
      // Removing the index attributes takes the item out of GSI1.
      await store.update({ PK: n, SK: 'c' }, { remove: ['GSI1PK', 'GSI1SK'] });
      assert.equal((await store.query({ index: 'GSI1', pk: `${n}#g` })).items.length, 0);
    });

    it('delete honours its condition and is idempotent', async () => {
      const n = ns();
      await store.put({ PK: n, SK: 'd', state: 'A' });
      await assert.rejects(store.delete({ PK: n, SK: 'd' }, { condition: cond.eq('state', 'B') }), ConditionFailed);
      assert.ok(await store.get({ PK: n, SK: 'd' }));
      await store.delete({ PK: n, SK: 'd' }, { condition: cond.eq('state', 'A') });
      assert.equal(await store.get({ PK: n, SK: 'd' }), undefined);
      await store.delete({ PK: n, SK: 'd' });
    });

    it('evaluates every condition kind as DynamoDB does, including missing attributes and mixed types', async () => {
      const n = ns();
      const item: Item = { PK: n, SK: 'k', s: 'b', num: 5, flag: true, nul: null };
      await store.put(item);
      const cases: Array<[Condition, boolean]> = [
        [cond.exists(), true],
        [cond.notExists(), false],
        [cond.attrExists('s'), true],
        [cond.attrExists('missing'), false],
        [cond.attrNotExists('missing'), true],
        [cond.eq('s', 'b'), true],
        [cond.eq('s', 'c'), false],
        [cond.eq('num', 5), true],
        [cond.eq('num', '5'), false],
        [cond.eq('flag', true), true],
        [cond.eq('nul', null), true],
        [cond.eq('missing', 'x'), false],
        [cond.not(cond.eq('missing', 'x')), true],
        [cond.lt('num', 6), true],
        [cond.le('num', 5), true],
        [cond.gt('num', 5), false],
        [cond.ge('num', 5), true],
        [cond.lt('s', 'c'), true],
        [cond.gt('s', 'a'), true],
        [cond.lt('num', 'zzz'), false],
        [cond.gt('missing', 0), false],
        [cond.in('s', ['a', 'b']), true],
        [cond.in('s', ['x', 'y']), false],
        [cond.and(cond.eq('s', 'b'), cond.eq('num', 5)), true],
        [cond.and(cond.eq('s', 'b'), cond.eq('num', 4)), false],
        [cond.or(cond.eq('s', 'x'), cond.eq('num', 5)), true],
        [cond.not(cond.exists()), false],
        // Nested: an `or` inside an `and`, a `not` of an `or`, an empty `and` inside an `or` (DynamoDB
        // refuses redundant parentheses: found by the crash campaign's distributed lane).
        [cond.and(cond.in('s', ['a', 'b']), cond.or(cond.attrNotExists('missing'), cond.lt('missing', 'x'))), true],
        [cond.and(cond.in('s', ['a', 'b']), cond.or(cond.attrExists('missing'), cond.gt('num', 6))), false],
        [cond.not(cond.or(cond.eq('s', 'x'), cond.and(cond.eq('num', 5), cond.not(cond.eq('flag', false))))), false],
        [cond.or(cond.and(), cond.eq('s', 'x')), true],
        [cond.and(cond.and(cond.and(cond.eq('s', 'b'))), cond.or(cond.or(cond.eq('num', 5)))), true],
      ];
      for (const [c, expected] of cases) {
        assert.equal(evaluateCondition(c, item), expected, `model: ${JSON.stringify(c)}`);
        const ops: TransactOp[] = [{ op: 'check', key: { PK: n, SK: 'k' }, condition: c }];
        const outcome = await store.transactWrite(ops).then(
          () => true,
          (e: unknown) => {
            if (e instanceof ConditionFailed) return false;
            throw e;
          },
        );
        assert.equal(outcome, expected, `engine: ${JSON.stringify(c)}`);
      }
      // Conditions on a missing item.
      await assert.rejects(store.transactWrite([{ op: 'check', key: { PK: n, SK: 'none' }, condition: cond.exists() }]), ConditionFailed);
      await store.transactWrite([{ op: 'check', key: { PK: n, SK: 'none' }, condition: cond.not(cond.eq('s', 'b')) }]);
    });

    it('queries a partition by sort-key prefix, range and direction', async () => {
      const n = ns();
      const sks = ['A#1', 'A#2', 'A#3', 'B#1', 'B#2', 'HEAD', 'V#0000000001', 'V#0000000002', 'V#0000000010'];
      for (const sk of sks) await store.put({ PK: n, SK: sk, sk });
      await store.put({ PK: `${n}x`, SK: 'A#9' });
      const sksOf = (items: Item[]) => items.map((i) => i.SK);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n })).items), sks);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { beginsWith: 'A#' } })).items), ['A#1', 'A#2', 'A#3']);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { beginsWith: 'V#' }, descending: true })).items), [
        'V#0000000010',
        'V#0000000002',
        'V#0000000001',
      ]);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { between: ['A#2', 'B#1'] } })).items), ['A#2', 'A#3', 'B#1']);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { lt: 'A#3' } })).items), ['A#1', 'A#2']);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { ge: 'HEAD' } })).items), [
        'HEAD',
        'V#0000000001',
        'V#0000000002',
        'V#0000000010',
      ]);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { eq: 'B#2' } })).items), ['B#2']);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { gt: 'V#0000000002' } })).items), ['V#0000000010']);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, sk: { le: 'A#1' } })).items), ['A#1']);
      assert.deepEqual((await store.query({ pk: `${n}-empty` })).items, []);
      assert.deepEqual(sksOf((await queryAll(store, { pk: n, limit: 2 })).items), sks, 'pages of 2 give everything in order');
    });

    it('queries GSI1 by partition, prefix and direction; items without both index keys are not indexed', async () => {
      const n = ns();
      const g = `${n}#STATE#DRAFT`;
      await store.put({ PK: `${n}#ART#b`, SK: 'V#1', GSI1PK: g, GSI1SK: '#2026-01-02#b' });
      await store.put({ PK: `${n}#ART#a`, SK: 'V#1', GSI1PK: g, GSI1SK: '#2026-01-01#a' });
      await store.put({ PK: `${n}#ART#c`, SK: 'V#1', GSI1PK: g, GSI1SK: '#2026-01-03#c' });
      await store.put({ PK: `${n}#ART#d`, SK: 'V#1', GSI1PK: g });
      await store.put({ PK: `${n}#ART#e`, SK: 'V#1', GSI1PK: `${n}#other`, GSI1SK: '#2026-01-01#e' });
      const { items } = await queryAll(store, { index: 'GSI1', pk: g, limit: 1 });
      assert.deepEqual(
        items.map((i) => i.PK),
        [`${n}#ART#a`, `${n}#ART#b`, `${n}#ART#c`],
      );
      const desc = await queryAll(store, { index: 'GSI1', pk: g, descending: true, sk: { beginsWith: '#2026-01-0' } });
      assert.deepEqual(
        desc.items.map((i) => i.PK),
        [`${n}#ART#c`, `${n}#ART#b`, `${n}#ART#a`],
      );
      const ranged = await queryAll(store, { index: 'GSI1', pk: g, sk: { between: ['#2026-01-02', '#2026-01-03'] } });
      assert.deepEqual(
        ranged.items.map((i) => i.PK),
        [`${n}#ART#b`],
      );
    });

    it('refuses a cursor that belongs to another query', async () => {
      const n = ns();
      for (let i = 0; i < 3; i++) await store.put({ PK: n, SK: `s${i}` });
      const page = await store.query({ pk: n, limit: 1 });
      assert.ok(page.cursor);
      await assert.rejects(store.query({ pk: `${n}-other`, cursor: page.cursor }), InvalidInput);
      await assert.rejects(store.query({ pk: n, cursor: 'not-a-cursor!!' }), InvalidInput);
      await assert.rejects(store.query({ pk: n, limit: 0 }), InvalidInput);
    });

    it('pagination returns every item exactly once, in order, for any page size and direction (property)', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.uniqueArray(fc.stringMatching(/^[a-z0-9#é]{1,8}$/), { minLength: 0, maxLength: 25 }),
          fc.integer({ min: 1, max: 7 }),
          fc.boolean(),
          fc.boolean(),
          // A key condition on the base table too: its bound and the cursor's are on the same side.
          fc.option(
            fc.oneof(
              fc.record({ beginsWith: fc.stringMatching(/^[a-z0-9#é]{1,2}$/) }),
              fc.tuple(fc.stringMatching(/^[a-z0-9]{1,3}$/), fc.stringMatching(/^[a-z0-9]{1,3}$/)).map(([a, b]) => ({
                between: (compare(a, b) <= 0 ? [a, b] : [b, a]) as [string, string],
              })),
              fc.constantFrom('gt', 'ge', 'lt', 'le').chain((op) => fc.stringMatching(/^[a-z0-9]{1,3}$/).map((v) => ({ [op]: v }))),
            ),
            { nil: undefined },
          ),
          async (sks, limit, descending, onIndex, cond) => {
            const n = ns();
            await store.batchPut(sks.map((sk) => ({ PK: `${n}#${sk}`, SK: sk, GSI1PK: n, GSI1SK: `#${sk}` })));
            if (!onIndex) await store.batchPut(sks.map((sk) => ({ PK: n, SK: sk })));
            const sk = onIndex ? undefined : (cond as QueryInput['sk']);
            const q: QueryInput = onIndex
              ? { index: 'GSI1', pk: n, limit, descending }
              : { pk: n, limit, descending, consistent: true, ...(sk ? { sk } : {}) };
            const { items } = await queryAll(store, q);
            const holds = (x: string): boolean => {
              if (!sk) return true;
              if ('beginsWith' in sk) return x.startsWith(sk.beginsWith);
              if ('between' in sk) return compare(sk.between[0], x) <= 0 && compare(x, sk.between[1]) <= 0;
              const [op, v] = Object.entries(sk)[0] as [string, string];
              const c = compare(x, v);
              return op === 'gt' ? c > 0 : op === 'ge' ? c >= 0 : op === 'lt' ? c < 0 : op === 'le' ? c <= 0 : c === 0;
            };
            const expected = [...sks].filter(holds).sort((a, b) => compare(a, b));
            if (descending) expected.reverse();
            assert.deepEqual(
              items.map((i) => (onIndex ? (i.GSI1SK as string).slice(1) : i.SK)),
              expected,
            );
          },
        ),
        { numRuns: h.runs },
      );
    });

    it('a transaction applies all of its operations', async () => {
      const n = ns();
      await store.put({ PK: n, SK: 'upd', count: 1 });
      await store.put({ PK: n, SK: 'del' });
      await store.put({ PK: n, SK: 'guard', state: 'OPEN' });
      await store.transactWrite([
        { op: 'put', item: { PK: n, SK: 'new', v: 1 }, condition: cond.notExists() },
        { op: 'update', key: { PK: n, SK: 'upd' }, update: { add: { count: 1 } }, condition: cond.eq('count', 1) },
        { op: 'delete', key: { PK: n, SK: 'del' }, condition: cond.exists() },
        { op: 'check', key: { PK: n, SK: 'guard' }, condition: cond.eq('state', 'OPEN') },
      ]);
      assert.equal((await store.get({ PK: n, SK: 'new' }))?.v, 1);
      assert.equal((await store.get({ PK: n, SK: 'upd' }))?.count, 2);
      assert.equal(await store.get({ PK: n, SK: 'del' }), undefined);
    });

    it('a transaction with one failing condition changes nothing and names the operation', async () => {
      const n = ns();
      await store.put({ PK: n, SK: 'upd', count: 1 });
      await store.put({ PK: n, SK: 'guard', state: 'CLOSED' });
      const err = await store
        .transactWrite([
          { op: 'put', item: { PK: n, SK: 'new', v: 1 } },
          { op: 'update', key: { PK: n, SK: 'upd' }, update: { add: { count: 1 } } },
          { op: 'check', key: { PK: n, SK: 'guard' }, condition: cond.eq('state', 'OPEN') },
        ])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.ok(err instanceof ConditionFailed, `expected ConditionFailed, got ${String(err)}`);
      assert.equal(err.failedIndex, 2);
      assert.equal(await store.get({ PK: n, SK: 'new' }), undefined);
      assert.equal((await store.get({ PK: n, SK: 'upd' }))?.count, 1);
    });

    it('refuses transactions that are empty, too large, or touch one item twice', async () => {
      const n = ns();
      await assert.rejects(store.transactWrite([]), InvalidInput);
      const many: TransactOp[] = Array.from({ length: 101 }, (_, i) => ({ op: 'put', item: { PK: n, SK: `i${i}` } }));
      await assert.rejects(store.transactWrite(many), InvalidInput);
      assert.equal((await store.query({ pk: n })).items.length, 0);
      await assert.rejects(
        store.transactWrite([
          { op: 'put', item: { PK: n, SK: 'same' } },
          { op: 'delete', key: { PK: n, SK: 'same' } },
        ]),
        InvalidInput,
      );
      await store.transactWrite(many.slice(0, 100));
      assert.equal((await queryAll(store, { pk: n })).items.length, 100);
    });

    it('refuses items over the size limit', async () => {
      const n = ns();
      await assert.rejects(store.put({ PK: n, SK: 'big', blob: 'x'.repeat(410 * 1024) }), InvalidInput);
      assert.equal(await store.get({ PK: n, SK: 'big' }), undefined);
    });

    it('transactions are all-or-nothing against a model (property)', async () => {
      const keyArb = fc.constantFrom('a', 'b', 'c', 'd', 'e');
      const condArb: fc.Arbitrary<Condition | undefined> = fc.oneof(
        fc.constant(undefined),
        fc.constant(cond.exists()),
        fc.constant(cond.notExists()),
        fc.integer({ min: 0, max: 3 }).map((v) => cond.eq('v', v)),
        fc.integer({ min: 0, max: 3 }).map((v) => cond.lt('v', v)),
      );
      const opArb = fc.oneof(
        fc.record({ op: fc.constant('put' as const), sk: keyArb, v: fc.integer({ min: 0, max: 3 }), c: condArb }),
        fc.record({ op: fc.constant('update' as const), sk: keyArb, v: fc.integer({ min: 0, max: 3 }), c: condArb }),
        fc.record({ op: fc.constant('delete' as const), sk: keyArb, v: fc.constant(0), c: condArb }),
        fc.record({ op: fc.constant('check' as const), sk: keyArb, v: fc.constant(0), c: condArb }),
      );
      const txArb = fc.uniqueArray(opArb, { minLength: 1, maxLength: 5, selector: (o) => o.sk });
      await fc.assert(
        fc.asyncProperty(fc.array(txArb, { minLength: 1, maxLength: 6 }), async (txs) => {
          const n = ns();
          const model = new Map<string, Item>();
          for (const tx of txs) {
            const ops: TransactOp[] = tx.map((o) => {
              const key = { PK: n, SK: o.sk };
              const condition = o.c ?? (o.op === 'check' ? cond.exists() : undefined);
              const base = condition ? { condition } : {};
              if (o.op === 'put') return { op: 'put', item: { ...key, v: o.v }, ...base };
              if (o.op === 'update') return { op: 'update', key, update: { set: { v: o.v }, add: { n: 1 } }, ...base };
              if (o.op === 'delete') return { op: 'delete', key, ...base };
              return { op: 'check', key, condition: condition as Condition };
            });
            const expectedOk = ops.every((op) => {
              const key = op.op === 'put' ? op.item : op.key;
              return !op.condition || evaluateCondition(op.condition, model.get(key.SK));
            });
            const ok = await store.transactWrite(ops).then(
              () => true,
              (e: unknown) => {
                if (e instanceof ConditionFailed) return false;
                throw e;
              },
            );
            assert.equal(ok, expectedOk);
            if (ok) {
              for (const op of ops) {
                if (op.op === 'put') model.set(op.item.SK, op.item);
                else if (op.op === 'update') model.set(op.key.SK, applyUpdate(op.key, model.get(op.key.SK), op.update));
                else if (op.op === 'delete') model.delete(op.key.SK);
              }
            }
            const actual = (await queryAll(store, { pk: n, consistent: true })).items;
            const expected = [...model.values()].sort((a, b) => compare(a.SK, b.SK));
            assert.deepEqual(actual, expected);
          }
        }),
        { numRuns: h.runs },
      );
    });

    it('batchGet returns the present items in key order; batchPut writes many', async () => {
      const n = ns();
      const items = Array.from({ length: 150 }, (_, i) => ({ PK: n, SK: `k${String(i).padStart(3, '0')}`, i }));
      await store.batchPut(items);
      const got = await store.batchGet([
        { PK: n, SK: 'k010' },
        { PK: n, SK: 'nope' },
        { PK: n, SK: 'k002' },
      ]);
      assert.deepEqual(
        got.map((i) => i.i),
        [10, 2],
      );
      // An eventually consistent batchGet (listings) answers the same items in the same order.
      const eventual = await store.batchGet(
        [
          { PK: n, SK: 'k149' },
          { PK: n, SK: 'k000' },
        ],
        { consistent: false },
      );
      assert.deepEqual(
        eventual.map((i) => i.i),
        [149, 0],
      );
      assert.equal((await queryAll(store, { pk: n, limit: 40 })).items.length, 150);
    });

    it('scan visits every item once across pages', async () => {
      const n = ns();
      await store.batchPut(Array.from({ length: 30 }, (_, i) => ({ PK: `${n}#${i % 7}`, SK: `s${i}` })));
      const seen = new Set<string>();
      let cursor: string | undefined;
      do {
        const page: Page = await store.scan(cursor ? { cursor, limit: 13 } : { limit: 13 });
        for (const item of page.items) {
          const id = `${item.PK}/${item.SK}`;
          assert.ok(!seen.has(id), `scan returned ${id} twice`);
          seen.add(id);
        }
        cursor = page.cursor;
      } while (cursor);
      assert.equal([...seen].filter((id) => id.startsWith(`${n}#`)).length, 30);
    });

    snapshotConformance(() => store, ns);
  });
}

// ---------------------------------------------------------------------------------------------------
// snapshot() (recovery issue: backups read the table through it). Kept in its own block.

async function scanSnapshot(snapshot: ItemSnapshot, prefix: string, limit: number): Promise<Item[]> {
  const out: Item[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page: Page = await snapshot.scan(cursor ? { cursor, limit } : { limit });
    for (const item of page.items) {
      const id = `${item.PK}/${item.SK}`;
      assert.ok(!seen.has(id), `snapshot scan returned ${id} twice`);
      seen.add(id);
      if (item.PK.startsWith(prefix)) out.push(item);
    }
    cursor = page.cursor;
    assert.ok(++pages < 10_000, 'snapshot pagination does not terminate');
  } while (cursor);
  return out.sort((a, b) => (`${a.PK}/${a.SK}` < `${b.PK}/${b.SK}` ? -1 : 1));
}

function snapshotConformance(store: () => ItemStore, ns: () => string): void {
  it('snapshot: its pages hold every item written before it, once each, with every attribute', async () => {
    const n = ns();
    const items: Item[] = Array.from({ length: 25 }, (_, i) => ({
      PK: `${n}#${i % 4}`,
      SK: `s${String(i).padStart(2, '0')}`,
      ...(i % 3 === 0 ? { GSI1PK: `${n}#G`, GSI1SK: `#${i}` } : {}),
      i,
      nested: { list: [i, 'x', { deep: true }], empty: '' },
    }));
    await store().batchPut(items);
    const snapshot = await store().snapshot();
    try {
      const got = await scanSnapshot(snapshot, `${n}#`, 7);
      const want = [...items].sort((a, b) => (`${a.PK}/${a.SK}` < `${b.PK}/${b.SK}` ? -1 : 1));
      assert.deepEqual(got, want);
    } finally {
      await snapshot.close();
    }
    await snapshot.close();
  });

  it('snapshot: a point-in-time view ignores later writes; a live view reads the table as it is', async () => {
    const n = ns();
    await store().batchPut([
      { PK: n, SK: 'a', v: 1 },
      { PK: n, SK: 'c', v: 3 },
    ]);
    const snapshot = await store().snapshot();
    try {
      await store().put({ PK: n, SK: 'b', v: 2 });
      await store().update({ PK: n, SK: 'a' }, { set: { v: 10 } });
      await store().delete({ PK: n, SK: 'c' });
      const got = (await scanSnapshot(snapshot, n, 1000)).filter((i) => i.PK === n).map((i) => [i.SK, i.v]);
      if (snapshot.pointInTime) {
        assert.deepEqual(got, [
          ['a', 1],
          ['c', 3],
        ]);
      } else {
        assert.deepEqual(got, [
          ['a', 10],
          ['b', 2],
        ]);
      }
    } finally {
      await snapshot.close();
    }
    assert.equal((await store().get({ PK: n, SK: 'a' }, { consistent: true }))?.v, 10, 'the table itself moved on');
  });
}
