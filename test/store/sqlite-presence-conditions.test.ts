/**
 * The SQLite engine answers a condition that asks only whether the item and one attribute exist
 * (the fence check `attrNotExists('holder')`) with json_type in SQL instead of parsing the item
 * (store/sqlite/writes.ts). As a property: for every stored item and every such condition (and the
 * ones that fall back to parsing: key columns, inherited names, names a JSON path would misread), a
 * check, a conditional put and a conditional delete succeed exactly when evaluateCondition says so.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ConditionFailed } from '../../src/core/errors.ts';
import { type Condition, cond, type Item } from '../../src/store/item-store.ts';
import { evaluateCondition } from '../../src/store/semantics.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';

const KEY = { PK: 'P', SK: 'S' };
const NAMES = ['holder', 'h', 'toString', 'constructor', '__proto__', 'PK', 'GSI1PK', 'a-b', 'a.b', 'ü', '_x1'];
const VALUES: unknown[] = [null, false, 0, '', 'x', [], {}, { holder: 1 }];

const attrCond: fc.Arbitrary<Condition> = fc
  .tuple(fc.constantFrom(...NAMES), fc.boolean())
  .map(([name, exists]) => (exists ? cond.attrExists(name) : cond.attrNotExists(name)));
const condition: fc.Arbitrary<Condition> = fc.letrec<{ c: Condition }>((tie) => ({
  c: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    attrCond,
    fc.constant(cond.exists()),
    fc.constant(cond.notExists()),
    fc.array(tie('c'), { minLength: 1, maxLength: 3 }).map((all) => cond.and(...all)),
    fc.array(tie('c'), { minLength: 1, maxLength: 3 }).map((any) => cond.or(...any)),
    tie('c').map((c) => cond.not(c)),
  ),
})).c;
const stored: fc.Arbitrary<Item | undefined> = fc.option(
  fc.dictionary(fc.constantFrom(...NAMES.filter((n) => n !== 'PK')), fc.constantFrom(...VALUES), { maxKeys: 3 }).map((attrs) => {
    const item: Item = { ...KEY, type: 't' };
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'GSI1PK') item.GSI1PK = 'G';
      else Object.defineProperty(item, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return item;
  }),
  { nil: undefined },
);

async function holds(run: () => Promise<unknown>): Promise<boolean> {
  try {
    await run();
    return true;
  } catch (e) {
    if (e instanceof ConditionFailed) return false;
    throw e;
  }
}

describe('SQLite presence conditions', () => {
  it('check, put and delete agree with evaluateCondition', async () => {
    const store = new SqliteItemStore(path.join(tempDir('alp-presence'), 'alp.db'));
    try {
      await fc.assert(
        fc.asyncProperty(stored, condition, async (item, c) => {
          await store.delete(KEY);
          if (item) await store.put(item);
          const current = await store.get(KEY);
          const want = evaluateCondition(c, current);
          assert.equal(await holds(() => store.transactWrite([{ op: 'check', key: KEY, condition: c }])), want, 'check');
          assert.equal(await holds(() => store.delete(KEY, { condition: c })), want, 'delete');
          if (current) await store.put(current);
          assert.equal(await holds(() => store.put({ ...KEY, type: 'new' }, { condition: c })), want, 'put');
        }),
        { numRuns: 400 },
      );
    } finally {
      await store.close();
    }
  });
});
